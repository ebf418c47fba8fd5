/* The rank vote of the collectives scope: a small NCCL all-reduce on a communicator split from
 * the program's, run by a voter thread so that a dead peer (NCCL calls block the host) costs the
 * caller CUGRAFT_VOTE_TIMEOUT_MS, never a hang. The protocol is written down in shim/entry/VOTE.md. */
#ifndef CG_SHIM_VOTE_H
#define CG_SHIM_VOTE_H

#include <cuda.h>
#include <stdint.h>

/* nccl.h declares ncclGroupStart() and ncclGroupEnd() without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

/* The libnccl definitions the voter calls (never our wrappers); split may be NULL (an old or
 * fake libnccl without it: no vote). */
struct cg_vote_nccl {
	__typeof__(&ncclCommSplit) split;
	__typeof__(&ncclAllReduce) all_reduce;
	__typeof__(&ncclCommAbort) abort;
	__typeof__(&ncclCommDestroy) destroy;
	__typeof__(&ncclCommUserRank) user_rank;
	__typeof__(&ncclCommCount) count;
};

enum cg_vote_result { CG_VOTE_OK, CG_VOTE_TIMEOUT, CG_VOTE_FAILED };

struct cg_voter;

/* A voter for `comm`: starts its thread, which makes `ctx` current and splits the vote
 * communicator off `comm` (collective over comm's ranks), waiting at most timeout_ms. NULL with
 * *why set when it cannot be had (CG_VOTE_TIMEOUT: the split did not finish in time). */
struct cg_voter *cg_voter_start(const struct cg_vote_nccl *nccl, ncclComm_t comm, CUcontext ctx,
                                long timeout_ms, enum cg_vote_result *why);
/* All ranks' max and min of `value` (one all-reduce of {v, -v} with ncclMax). On a timeout the
 * voter is abandoned (its thread aborts the vote communicator if its call ever returns): later
 * calls return CG_VOTE_FAILED, and so do they after a failed vote (its thread has released
 * everything and exited). */
enum cg_vote_result cg_vote(struct cg_voter *v, int64_t value, int64_t *max, int64_t *min);
int cg_voter_rank(const struct cg_voter *v);
int cg_voter_nranks(const struct cg_voter *v);
/* Before the parent communicator goes: the thread destroys the vote communicator, frees its
 * stream and buffers and exits; waits at most the timeout. `v` must not be used again. */
void cg_voter_stop(struct cg_voter *v);
/* Before `parent` goes (NULL: every communicator, at exit): waits up to wait_ms for any voter
 * thread, also an abandoned one, that is still inside an NCCL call on it (the split), so that
 * the program's destroy does not free the communicator under it. */
void cg_voters_leave_parent(ncclComm_t parent, long wait_ms);

#endif
