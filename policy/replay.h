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
/* The op is the first deferred one. */
void cg_begin_deferring(struct cg_stream *s, const struct cg_op *op, uint64_t hash);
/* At a chunk start: defer the op if it starts an armed chunk worth deferring for here
 * (`here`, `margin`: the chunk that ran at this place and its lead; 0: none). */
bool cg_start_deferral(struct cg_stream *s, const struct cg_op *op, uint64_t hash,
                       uint64_t here, uint32_t margin);
/* While deferring: keep the candidates whose next op is this one. False when none is left. */
bool cg_follow_deferred(struct cg_stream *s, const struct cg_op *op, uint64_t hash);
/* No candidate continues with `op`: the deferred ops run eagerly and are learned. */
void cg_diverge(struct cg_stream *s, const struct cg_op *op, uint64_t hash);

#endif
