/* Graphs that come at once (pieces.c), for ops held back that have occurred often enough.
 * Pieces of armed chunks: where a program boundary cuts the ops of an armed chunk short (a host
 * copy every few steps, mid-step, or a short loop's unit out of step with it), the ops before it
 * have occurred as often as the chunk has, so they become a chunk with a graph of their own at
 * once; and the ops after the boundary, where no armed chunk starts with them but the cut one
 * continues with them, are deferred as its rest and, once complete, replayed the same way. And
 * the sighting of a learning chunk that earns it its graph, held as it came: it runs as that
 * graph. Internal to policy/. */
#ifndef CG_POLICY_PIECES_H
#define CG_POLICY_PIECES_H

#include "policy/stream.h"

/* The deferred ops, cut out of an armed chunk by a boundary: a chunk with a graph of their own
 * now, where they were seen `warmup` times. Returns it (NULL: no graph for them). */
struct cg_chunk *cg_arm_piece(struct cg_stream *s);
/* The held ops are the chunk held for, complete: where this sighting earns it its graph, the
 * graph is built from them and launched in their place, else they run as a learning sample. */
void cg_hold_complete(struct cg_stream *s);
/* The deferred ops, a piece of s->rest.chunk, run eagerly and stay the start of the learning chunk. */
void cg_rest_eager(struct cg_stream *s);
/* The first op after a boundary that cut `rest` short after its op `at`: deferred as the start
 * of its rest when it is the op the chunk continues with. */
bool cg_start_rest(struct cg_stream *s, struct cg_chunk *rest, uint32_t at,
                   const struct cg_op *op, uint64_t hash);
/* While deferring the rest of a chunk: does the op continue it? */
bool cg_follow_rest(struct cg_stream *s, const struct cg_op *op, uint64_t hash);

#endif
