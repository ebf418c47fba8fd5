/* The collectives scope (CUGRAFT_SCOPE=+collectives): each NCCL collective outside a group is
 * replayed from its own one-collective graph once every rank agrees by vote (vote.h) that it
 * has the same graph; otherwise every rank runs it eagerly. Protocol: shim/entry/VOTE.md. */
#ifndef CG_SHIM_COLLGRAPH_H
#define CG_SHIM_COLLGRAPH_H

#include <stdint.h>

#include "vote.h"

#define CG_COLL_WORDS 7 /* a collective's arguments but its stream */

/* One program call. The caller fills the first block; cg_coll_begin_or_lock the rest. */
struct cg_coll_call {
	int entry;                   /* which collective (nccl_hooks.c's id), part of the key */
	const char *api;             /* its name, for the report */
	ncclComm_t comm;
	CUstream stream;             /* the program's stream: not part of the key */
	int nw;
	uint64_t w[CG_COLL_WORDS];   /* every argument but the stream (buffers, count, type, op,
	                                root or peer, comm): the key */
	CUstream capture;            /* CG_COLL_CAPTURE: run the real call on this stream */
	struct cg_coll_comm *rec;
	struct cg_coll_slot *slot;
};

enum cg_coll_act {
	CG_COLL_EAGER,   /* run the real call on the program's stream */
	CG_COLL_CAPTURE, /* all ranks capture: run the real call on c->capture, then cg_coll_captured */
	CG_COLL_DONE,    /* replayed from its graph on the program's stream: nothing left to do */
};

/* At a collective outside a group (its stream's pending work already submitted): votes and, on
 * agreement, launches the graph or starts the capture. Blocks at most CUGRAFT_VOTE_TIMEOUT_MS
 * per vote. CG_COLL_CAPTURE returns with the communicator's record locked (hence the name):
 * the caller makes the real call on c->capture, then cg_coll_captured. */
enum cg_coll_act cg_coll_begin_or_lock(struct cg_coll_call *c, const struct cg_vote_nccl *nccl);
/* After CG_COLL_CAPTURE, with the real call's result: ends the capture, votes whether every
 * rank has its graph, and launches it (CG_COLL_DONE) or drops it (CG_COLL_EAGER). Unlocks the
 * record cg_coll_begin_or_lock left locked. */
enum cg_coll_act cg_coll_captured(struct cg_coll_call *c, ncclResult_t r);
/* Before the communicator is finalized, destroyed, revoked or aborted: its graphs are destroyed
 * and its vote communicator aborted (never blocks on peers). */
void cg_coll_comm_gone(ncclComm_t comm);

struct cg_json;
/* The summary's "collectives_graphed" (launched from graphs), "votes" {held, agreed, declined,
 * timed_out} and "collective_graphs" {seen, captured, fallbacks, comms[]}: collectives scope only. */
void cg_coll_json(struct cg_json *j);

#endif
