/* Replay (replay.c): ops that start an armed chunk are deferred, followed while they match
 * a candidate, and launched as its graph once one is complete; where none continues, they run
 * eagerly (a divergence). Also the deferral budget the flusher enforces. Internal to policy/. */
#ifndef CG_POLICY_REPLAY_H
#define CG_POLICY_REPLAY_H

#include "policy/stream.h"

/* A deferral hit the budget: the stream's budget doubles (up to its cap). */
void cg_budget_timeout(struct cg_stream *s);
/* The deferred ops are exactly `t`: launch its graph with their arguments patched in. */
void cg_launch_chunk(struct cg_stream *s, struct cg_chunk *t);
/* At a chunk start: defer the op if it starts an armed chunk worth deferring for here
 * (`here`, `margin`: the chunk that ran at this place and its lead; 0: none). */
bool cg_start_deferral(struct cg_stream *s, const struct cg_op *op, uint64_t hash,
                       uint64_t here, uint32_t margin);
/* While deferring: keep the candidates whose next op is this one. False when none is left. */
bool cg_follow_deferred(struct cg_stream *s, const struct cg_op *op, uint64_t hash);
/* At a boundary after `at` deferred ops: the candidate it cuts short (NULL: none). */
struct cg_chunk *cg_defer_cut_short(const struct cg_stream *s, uint32_t at);
/* The deferral timed out (no candidate complete): true where the candidates keep timing out
 * and the ops that did arrive ran as a graph of their own, built now; false: they are still
 * deferred (those candidates may be gone). */
bool cg_defer_timed_out(struct cg_stream *s);
/* No candidate continues with `op`: the deferred ops run eagerly and are learned. */
void cg_diverge(struct cg_stream *s, const struct cg_op *op, uint64_t hash);

#endif
