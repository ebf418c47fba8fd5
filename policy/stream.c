/* A stream's primitives (stream.h): what the state machine and the cost gate's samples do to
 * a stream's current chunk, its chunks' graphs and its reports. */
#include "policy/stream.h"

#define CG_FALLBACK_EVENTS 8  /* FALLBACK events per reason per stream; counts go on */

/* ---- the mode ------------------------------------------------------------------------- */

/* The state machine's one transition (stream.h: enum cg_mode). Every change of a stream's mode
 * goes through cg_set_mode, which checks in debug builds what the mode entered needs and keeps
 * the invariant the flusher reads: work is pending (pending_since non-zero) exactly while the
 * stream is not learning. engine.c decides when a chunk starts and ends; the modes' own files
 * (replay.c, pieces.c, samples.c) enter their mode and leave it when their ops have run. */
static void mark_pending(struct cg_stream *s)
{
	uint64_t now = s->e->now_ns();
	__atomic_store_n(&s->pending_since, now ? now : 1, __ATOMIC_RELAXED);
}

void cg_set_mode(struct cg_stream *s, enum cg_mode to)
{
	enum cg_mode from = s->mode;
	switch (to) {
	case CG_MODE_LEARNING:
		CG_ASSERT(from != CG_MODE_LEARNING);
		s->defer.ncand = 0;
		s->defer.complete = NULL;
		s->defer.expect = NULL;
		s->rest.chunk = NULL;
		s->hold = NULL;
		__atomic_store_n(&s->pending_since, 0, __ATOMIC_RELAXED);
		break;
	case CG_MODE_HOLDING:
		/* at a chunk start, for a learning chunk it may earn its graph or a sample */
		CG_ASSERT(from == CG_MODE_LEARNING && !s->sc.n);
		CG_ASSERT(s->hold && s->hold->state == CG_CHUNK_LEARNING);
		mark_pending(s);
		break;
	case CG_MODE_DEFERRING:
		/* its first op deferred: a prefix of every candidate, none of them a rest */
		CG_ASSERT(from == CG_MODE_LEARNING && s->sc.n == 1 && !s->hold && !s->rest.chunk);
		CG_ASSERT(s->defer.ncand > 0 && s->defer.ncand <= s->defer.cap);
		for (uint32_t i = 0; i < s->defer.ncand; i++)  /* each candidate begins with it */
			CG_ASSERT(s->defer.cand[i]->state == CG_CHUNK_ARMED && s->defer.cand[i]->n >= 1);
		mark_pending(s);
		break;
	case CG_MODE_DEFERRING_REST:
		CG_ASSERT(from == CG_MODE_LEARNING && s->sc.n == 1 && !s->hold && !s->defer.ncand);
		CG_ASSERT(s->rest.chunk && s->rest.at < s->rest.chunk->n);
		mark_pending(s);
		break;
	}
	s->mode = to;
}


/* ---- events and reasons ---------------------------------------------------------------- */

void cg_emit(struct cg_stream *s, struct cg_event ev)
{
	if (!s->e->be->event)
		return;
	ev.stream_id = s->id;
	s->e->be->event(s->e->be_ctx, &ev);
}

void cg_emit_build_failed(struct cg_stream *s, const struct cg_chunk *t, const char *detail)
{
	cg_emit(s, (struct cg_event){ .kind = CG_EV_BUILD_FAILED, .reason = CG_R_BUILD_FAILED,
	                              .op_index = s->chunk_first, .chunk_ops = t->n,
	                              .chunk_key = t->key, .detail = detail });
}

/* `n` ops ran eagerly because of `r`; `ev` says where (kind and reason are filled in here).
 * An incident is reported once: the rest of a chunk that diverged is only counted. */
void cg_fallback(struct cg_stream *s, enum cg_reason r, uint32_t n, bool report,
                 struct cg_event ev)
{
	ST(s, fallbacks[r], n);
	if (!report || s->fallback_events[r] >= CG_FALLBACK_EVENTS)
		return;
	s->fallback_events[r]++;
	ev.kind = CG_EV_FALLBACK;
	ev.reason = r;
	cg_emit(s, ev);
}

/* `cost`: what the chunk's timing showed, where that decided (else NULL). */
static void chunk_event_costed(struct cg_stream *s, enum cg_event_kind kind, enum cg_reason r,
                               const struct cg_chunk *t, const struct cg_chunk_cost *cost)
{
	cg_emit(s, (struct cg_event){ .kind = kind, .reason = r, .op_index = s->chunk_first,
	                              .chunk_ops = t->n, .chunk_key = t->key, .cost = cost });
}

static void chunk_event(struct cg_stream *s, enum cg_event_kind kind, enum cg_reason r,
                        const struct cg_chunk *t)
{
	chunk_event_costed(s, kind, r, t, NULL);
}

/* ---- places ---------------------------------------------------------------------------- */

/* Boundaries, or a long loop's iterations, restart the count of a chunk's ends (as its
 * instances, pick_instance in engine.c). */
static uint64_t place_epoch(const struct cg_stream *s)
{
	return s->epoch + (s->per.period >= s->e->cfg.chunk_max ? s->per.iterations : 0);
}

/* The current chunk ended as `t` (NULL: no template): it ran at this place, and the next chunk
 * runs at the place after it. */
void cg_chunk_ended(struct cg_stream *s, struct cg_chunk *t)
{
	if (!t) {
		s->place = 0;
		s->place_unsure = false;
		s->eager_place = NULL;
		return;
	}
	if (s->place && !s->place_unsure) {
		enum cg_place_note n = cg_places_note(&s->places, s->place, t->key, s->ix.nchunks,
		                                      s->e->mem);
		ST(s, place_variants, n == CG_PLACE_SECOND);
		ST(s, place_variants_past, n == CG_PLACE_REPLACED);
	}
	s->place_unsure = false;
	s->eager_place = NULL;
	uint64_t epoch = place_epoch(s);
	if (t->ends_epoch != epoch) {
		t->ends_epoch = epoch;
		t->ends = 0;
	}
	/* (a loop of one short chunk and no boundary: its places stop multiplying) */
	s->place = cg_place_after(t->key, t->ends < 255 ? t->ends++ : 255);
}

/* The learning chunk started where deferral was not worth it, `eager_place` being the chunk
 * that runs there: it ends where that chunk ends, as it would have deferred (a boundary that
 * comes only while work is pending, such as stream ordering, would have cut it there). */
bool cg_place_chunk_ends(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	const struct cg_chunk *t = s->eager_place;
	uint32_t i = s->sc.n - 1;
	if (!t)
		return false;
	if (i >= t->n || !cg_chunk_op_matches(t, i, op, hash)) {
		s->eager_place = NULL;
		return false;
	}
	return i + 1 == t->n;
}

/* ---- the current chunk ----------------------------------------------------------------- */

void cg_push_op(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	if (!s->sc.n)
		s->chunk_first = s->op_index - 1;
	cg_scratch_push(&s->sc, op, hash, s->e->mem);
}

void cg_chunk_reset(struct cg_stream *s)
{
	cg_scratch_reset(&s->sc);
	s->why = CG_R_NONE;
	s->passed = 0;
	s->diverged_at = 0;
}

/* Submit the deferred ops eagerly, in order. They stay in the scratch as the beginning of a
 * chunk being learned (unless the caller resets it). */
void cg_run_deferred(struct cg_stream *s)
{
	const struct cg_engine *e = s->e;
	uint32_t n = s->sc.n;
	CG_ASSERT(s->mode != CG_MODE_LEARNING);
	for (uint32_t i = 0; i < n; i++) {
		struct cg_op op;
		cg_scratch_op(&s->sc, i, &op);
		/* The program was told its launch succeeded; a driver error now has nobody to go
		 * to, exactly as with an asynchronous kernel fault. */
		e->be->eager(e->be_ctx, s->be_stream, &op, NULL);
	}
	ST(s, ops_eager, n);
	ST(s, ops_flushed, n);
	cg_set_mode(s, CG_MODE_LEARNING);
}

void cg_submit_deferred(struct cg_stream *s, enum cg_reason r, struct cg_event ev)
{
	uint32_t n = s->sc.n;
	ST(s, ops_wasted, n);
	cg_run_deferred(s);
	cg_fallback(s, r, n, true, ev);
}

/* The held ops run eagerly now, in order, and count as if the program had passed them (the
 * chunk being learned goes on as it would have): all of them, or all but the latest when the
 * caller is to submit that one itself (`keep_last`). */
void cg_release_hold(struct cg_stream *s, bool keep_last)
{
	const struct cg_engine *e = s->e;
	CG_ASSERT(s->mode == CG_MODE_HOLDING && s->sc.n >= (keep_last ? 1u : 0u));
	uint32_t n = s->sc.n - (keep_last ? 1 : 0);
	for (uint32_t i = 0; i < n; i++) {
		struct cg_op op;
		cg_scratch_op(&s->sc, i, &op);
		e->be->eager(e->be_ctx, s->be_stream, &op, NULL);
	}
	ST(s, ops_eager, s->sc.n);
	ST(s, ops_flushed, n);
	s->passed = s->sc.n;
	cg_set_mode(s, CG_MODE_LEARNING);
}

/* ---- graphs ----------------------------------------------------------------------------- */

/* Every instance's graph (through the backend unless the driver is gone). */
void cg_destroy_instances(struct cg_stream *s, struct cg_chunk *t, bool driver_gone)
{
	const struct cg_engine *e = s->e;
	if (!t->graph)
		return;
	if (!driver_gone) {
		e->be->destroy(e->be_ctx, t->graph);
		for (uint32_t k = 1; k < t->ninst; k++)
			e->be->destroy(e->be_ctx, t->xgraph[k - 1]);
	}
	__atomic_fetch_sub(&s->e->graphs_alive, t->ninst, __ATOMIC_RELAXED);
	t->graph = NULL;
	t->ninst = 0;
}

static void drop_graph(struct cg_stream *s, struct cg_chunk *t)
{
	if (t->state == CG_CHUNK_ARMED)
		cg_index_disarm(&s->ix, t);
	cg_destroy_instances(s, t, false);
	/* A chunk that loses its graph can no longer be launched for the deferred ops. */
	struct cg_defer *d = &s->defer;
	uint32_t kept = 0;
	for (uint32_t i = 0; i < d->ncand; i++)
		if (d->cand[i] != t)
			d->cand[kept++] = d->cand[i];
	d->ncand = kept;
	if (d->complete == t)
		d->complete = NULL;
	if (d->expect == t)
		d->expect = NULL;
}

void cg_disable_costed(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r,
                       const struct cg_chunk_cost *cost)
{
	if (t->graph)
		drop_graph(s, t);
	t->state = CG_CHUNK_DISABLED;
	t->why = r;
	ST(s, chunks_disabled, 1);
	chunk_event_costed(s, CG_EV_CHUNK_DISABLED, r, t, cost);
}

void cg_disable(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r)
{
	cg_disable_costed(s, t, r, NULL);
}

/* A graph API failed for this chunk: back off exponentially, give up after fail_limit. */
void cg_chunk_failed(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r)
{
	if (t->graph)
		drop_graph(s, t);
	t->why = r;
	if (++t->fails >= s->e->cfg.fail_limit) {
		cg_disable(s, t, CG_R_DISABLED);
		return;
	}
	t->state = CG_CHUNK_BACKOFF;
	t->skip = 1u << (t->fails < 31 ? t->fails : 31);
}

/* Take a slot under max_graphs. When full, evict this stream's least recently launched graph:
 * other streams' graphs are guarded by their own locks, so they are out of reach. */
bool cg_reserve_graph(struct cg_stream *s, const struct cg_chunk *keep)
{
	struct cg_engine *e = s->e;
	if (__atomic_fetch_add(&e->graphs_alive, 1, __ATOMIC_RELAXED) < e->cfg.max_graphs)
		return true;
	struct cg_chunk *lru = NULL;
	for (uint32_t i = 0; i <= s->ix.key_mask; i++) {
		struct cg_chunk *t = s->ix.by_key[i];
		if (t && t != keep && t->state == CG_CHUNK_ARMED && (!lru || t->last_used < lru->last_used))
			lru = t;
	}
	if (!lru) {
		__atomic_fetch_sub(&e->graphs_alive, 1, __ATOMIC_RELAXED);
		return false;
	}
	drop_graph(s, lru);
	lru->state = CG_CHUNK_IDLE;
	ST(s, graphs_evicted, 1);
	chunk_event(s, CG_EV_EVICTED, CG_R_MAX_GRAPHS, lru);
	return true;
}

/* Build the chunk's graph from the occurrence in the scratch (which already ran eagerly).
 * Returns NONE, or why it has no graph. */
enum cg_reason cg_build_graph(struct cg_stream *s, struct cg_chunk *t, const char **detail)
{
	struct cg_engine *e = s->e;
	if (!cg_reserve_graph(s, NULL))
		return CG_R_MAX_GRAPHS;
	for (uint32_t i = 0; i < t->n; i++)
		cg_scratch_op(&s->sc, i, &s->ops[i]);
	void *graph = NULL;
	if (e->be->build(e->be_ctx, s->be_stream, s->ops, t->n, cg_chunk_changes_most(t),
	                 &graph, detail) != 0) {
		__atomic_fetch_sub(&e->graphs_alive, 1, __ATOMIC_RELAXED);
		cg_emit_build_failed(s, t, *detail);
		cg_chunk_failed(s, t, CG_R_BUILD_FAILED);
		return CG_R_BUILD_FAILED;
	}
	if (!cg_index_arm(&s->ix, t)) {
		e->be->destroy(e->be_ctx, graph);
		__atomic_fetch_sub(&e->graphs_alive, 1, __ATOMIC_RELAXED);
		return CG_R_NO_MEMORY;
	}
	t->graph = graph;
	t->ninst = 1;
	t->state = CG_CHUNK_ARMED;
	t->last_used = ++s->tick;
	cg_chunk_hold_args(t, &s->sc);
	ST(s, graphs_built, 1);
	__atomic_fetch_add(&e->built, 1, __ATOMIC_RELAXED);
	chunk_event(s, CG_EV_GRAPH_BUILT, CG_R_NONE, t);
	return CG_R_NONE;
}

/* One more occurrence of `t` ran eagerly (learning), its content seen `sightings` times in
 * the loop so far (loop.h): advance its state. Returns the reason its ops ran eagerly. */
enum cg_reason cg_learned(struct cg_stream *s, struct cg_chunk *t, uint32_t sightings,
                          const char **detail)
{
	const struct cg_engine_config *cfg = &s->e->cfg;
	enum cg_reason r;

	switch (t->state) {
	case CG_CHUNK_LEARNING:
		cg_chunk_note_args(t, &s->sc);
		t->seen = t->seen + 1 > sightings ? t->seen + 1 : sightings;
		if (t->seen < cfg->warmup)
			return CG_R_LEARNING;
		t->state = CG_CHUNK_IDLE;
		uint64_t constant, changing;
		cg_chunk_arg_words(t, &constant, &changing);
		ST(s, chunks_learned, 1);
		ST(s, arg_words_constant, constant);
		ST(s, arg_words_changing, changing);
		chunk_event(s, CG_EV_CHUNK_ARMED, CG_R_NONE, t);
		__attribute__((fallthrough));  /* build it now */
	case CG_CHUNK_IDLE:
		if (cfg->record_only)
			return CG_R_LEARNING;
		r = cg_build_graph(s, t, detail);
		return r ? r : CG_R_LEARNING;
	case CG_CHUNK_BACKOFF:
		if (t->skip) {
			t->skip--;
			return t->why;
		}
		r = cg_build_graph(s, t, detail);
		return r ? r : t->why;
	case CG_CHUNK_ARMED:
		/* Armed, yet learned: its start was not a chunk start (a divergence or a flush). */
		return CG_R_LEARNING;
	case CG_CHUNK_DISABLED:
		return t->why;
	}
	return CG_R_LEARNING;
}

/* Learning chunk `t` was just seen: first among those that begin with its first op (the oldest
 * of them goes where there are more). */
static void note_learning(struct cg_stream *s, struct cg_chunk *t)
{
	struct cg_chunk **w = s->learn_first[t->hash[0] % CG_LEARN_FIRST];
	uint32_t i = 0;
	while (i < CG_LEARN_WAYS - 1 && w[i] != t)
		i++;
	memmove(w + 1, w, i * sizeof(*w));
	w[0] = t;
}

/* End the learning chunk: find or add its template, let it advance, count its eager ops.
 * `latest`: the chunk ends with the latest op the loop detector saw (not so after a divergence,
 * whose op is not part of it), so the loop can say how often it occurred already. */
struct cg_chunk *cg_cut(struct cg_stream *s, bool learn_it, bool latest)
{
	struct cg_scratch *sc = &s->sc;
	cg_loop_chunk_end(&s->per, !s->length_cut);
	s->length_cut = false;
	s->cut_before = NULL;
	if (!sc->n)
		return NULL;
	enum cg_reason r = sc->lossy ? CG_R_NO_MEMORY : CG_R_LEARNING;
	const char *detail = NULL;
	struct cg_chunk *t = NULL;
	if (learn_it && !sc->lossy) {
		t = cg_index_find(&s->ix, sc);
		if (!t)
			t = cg_index_add(&s->ix, sc);
		if (t)
			r = cg_learned(s, t, latest ? cg_loop_sightings(&s->per, sc->n) : 1, &detail);
		/* Seen now: its next sightings can be held (cg_start_hold). */
		if (t && t->state == CG_CHUNK_LEARNING)
			note_learning(s, t);
	}
	cg_learning_ended(s, t, r, detail);
	return t;
}

void cg_learning_ended(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r,
                       const char *detail)
{
	bool report = s->why == CG_R_NONE;
	if (!report)
		r = s->why;
	if (s->passed)
		cg_fallback(s, r, s->passed, report, (struct cg_event){ .op_index = s->chunk_first,
		            .chunk_ops = s->sc.n, .chunk_key = t ? t->key : 0, .detail = detail });
	cg_chunk_ended(s, t);
	cg_chunk_reset(s);
}
