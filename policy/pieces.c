/* Graphs that come at once: pieces of armed chunks, held sightings (pieces.h). */
#include "policy/pieces.h"
#include "policy/replay.h"
#include "policy/samples.h"

/* The deferred ops are a piece of an armed chunk that the program's boundaries cut out of it
 * (its first ops, before a host copy every few steps mid-step; or its rest, after one): they
 * have occurred as often as it has, at least `warmup` times. They become a chunk of their own
 * with a graph now, built from them and launched in their place (complete), instead of running
 * eagerly and being learned again, piece by piece. */
struct cg_chunk *cg_arm_piece(struct cg_stream *s)
{
	CG_ASSERT(s->mode == CG_MODE_DEFERRING || s->mode == CG_MODE_DEFERRING_REST);
	const struct cg_chunk *rest = s->mode == CG_MODE_DEFERRING_REST ? s->rest.chunk : NULL;
	uint32_t seen = rest && rest->state == CG_CHUNK_ARMED ? rest->seen : 0;
	for (uint32_t i = 0; s->mode == CG_MODE_DEFERRING && i < s->defer.ncand; i++)
		if (s->defer.cand[i]->seen > seen)
			seen = s->defer.cand[i]->seen;
	if (seen < s->e->cfg.warmup || s->sc.lossy || s->e->cfg.record_only)
		return NULL;
	struct cg_chunk *t = cg_index_find(&s->ix, &s->sc);
	if (!t)
		t = cg_index_add(&s->ix, &s->sc);
	if (!t || t->state != CG_CHUNK_LEARNING)
		return NULL;  /* (an idle one was dropped for room or a build failed: learned as usual) */
	const char *detail = NULL;
	cg_learned(s, t, seen, &detail);
	return t->state == CG_CHUNK_ARMED ? t : NULL;
}

/* The held ops are the chunk they were held for, complete. Where this sighting earns it its
 * graph (its `warmup`th), the graph is built from them and launched in their place, as a
 * deferral's would be: held for an eager sample, they would run eagerly once more, and the gate
 * needs one only for a graph whose GPU time comes near the launch time it saves, which the
 * graph's own samples tell (cg_timing_wanted takes it from a later occurrence then). Otherwise
 * they run as a learning sample (cg_learn_sample). */
void cg_hold_complete(struct cg_stream *s)
{
	struct cg_engine *e = s->e;
	struct cg_chunk *t = s->hold;
	CG_ASSERT(s->mode == CG_MODE_HOLDING && s->sc.n == t->n);
	uint32_t seen = cg_loop_sightings(&s->per, s->sc.n);
	if (seen < t->seen + 1)
		seen = t->seen + 1;
	if (t->state != CG_CHUNK_LEARNING || seen < e->cfg.warmup || s->sc.lossy ||
	    e->cfg.record_only || s->why != CG_R_NONE) {
		cg_learn_sample(s);
		return;
	}
	const char *detail = NULL;
	enum cg_reason r = cg_learned(s, t, seen, &detail);
	if (t->state == CG_CHUNK_ARMED) {
		cg_launch_chunk(s, t);  /* (no longer held once it ran) */
		return;
	}
	/* no graph came (its build failed): the ops run eagerly, learned already */
	cg_release_hold(s, false);
	cg_learning_ended(s, t, r, detail);
}

/* The deferred ops, a piece of `rest`, run eagerly and stay the start of the chunk being
 * learned (they were no more than a guess). */
void cg_rest_eager(struct cg_stream *s)
{
	uint32_t n = s->sc.n;
	CG_ASSERT(s->mode == CG_MODE_DEFERRING_REST);
	ST(s, ops_wasted, n);
	cg_run_deferred(s);
	cg_fallback(s, CG_R_LEARNING, n, false, (struct cg_event){ 0 });
}

/* The deferred rest grew by one op: once it is complete, the piece runs as its own graph, or
 * eagerly where it has none. */
static void rest_grew(struct cg_stream *s)
{
	CG_ASSERT(s->rest.at + s->sc.n <= s->rest.chunk->n);
	if (s->rest.at + s->sc.n < s->rest.chunk->n)
		return;
	struct cg_chunk *t = cg_arm_piece(s);
	if (t)
		cg_launch_chunk(s, t);
	else
		cg_rest_eager(s);
}

/* The first op after a boundary that cut `rest` short, no armed chunk starting with it: when it
 * is the op that chunk continues with, it is deferred as the start of the chunk's rest. */
bool cg_start_rest(struct cg_stream *s, struct cg_chunk *rest, uint32_t at,
                   const struct cg_op *op, uint64_t hash)
{
	if (!rest || at >= rest->n || !cg_chunk_op_matches(rest, at, op, hash))
		return false;
	if (!cg_scratch_reserve(&s->sc, cg_chunk_bytes(rest), s->e->mem))
		return false;
	s->rest = (struct cg_rest){ rest, at };
	cg_push_op(s, op, hash);
	cg_set_mode(s, CG_MODE_DEFERRING_REST);
	rest_grew(s);
	return true;
}

/* While deferring the rest of a chunk: does the op continue it? */
bool cg_follow_rest(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	const struct cg_chunk *t = s->rest.chunk;
	uint32_t pos = s->rest.at + s->sc.n;
	CG_ASSERT(s->mode == CG_MODE_DEFERRING_REST);
	if (pos >= t->n || !cg_chunk_op_matches(t, pos, op, hash))
		return false;
	cg_push_op(s, op, hash);
	rest_grew(s);
	return true;
}
