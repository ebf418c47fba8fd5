/* The per-stream state machine. Learning: the op sequence is cut into chunks by content (so the
 * chunks of a loop align by themselves, whatever its period or prologue); a chunk seen `warmup`
 * times gets a graph. Replay: ops that match an armed chunk are deferred until it is complete,
 * then its graph is launched with the changed arguments patched in. Anything else runs eagerly,
 * in order, and is counted by reason. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "policy/chunk.h"
#include "policy/clock.h"
#include "policy/control.h"
#include "policy/engine.h"
#include "policy/gate.h"
#include "policy/loop.h"

#define CG_FALLBACK_EVENTS 8  /* FALLBACK events per reason per stream; counts go on */
#define CG_INSTANCES 32       /* graphs per chunk, one per recurrence between two boundaries */
#define CG_SITES 32           /* divergence sites kept (the report shows the most frequent) */
#define CG_PLACE_SETTLED 3    /* runs by which a place's chunk leads another before it is trusted */
#define CG_SPLITS 32  /* exposed chunks a stream cuts in two (cut_exposed), at most */
#define CG_SPLIT_MIN 2  /* ops in each part, at least */
#define CG_INSTANCE_OPS 1024  /* and more of a short chunk, up to this many nodes in all */
#define CG_LEARN_FIRST 64     /* learning chunks a stream finds by their first op (direct-mapped) */
#define CG_HOLD_DECLINED 8    /* learning samples declined in a row after which a stream holds
                                 chunks for them again only after CG_HOLD_SKIP it could have */
#define CG_HOLD_SKIP 64

struct cg_engine {
	struct cg_engine_config cfg;
	struct cg_gate_costs gate;  /* the cost gate's view of cfg */
	cg_realloc_fn mem;
	uint32_t chunk_min;
	uint64_t cdc_below;     /* cut where (hash >> 32) < cdc_below: probability 1 / cdc_mod */
	const struct cg_backend *be;
	void *be_ctx;
	uint64_t (*now_ns)(void);
	uint64_t graphs_alive;  /* atomic: all streams build against max_graphs */
	pthread_mutex_t lock;   /* guards the stream list, `retired` and `sites` */
	struct cg_stream *streams;
	struct cg_stats retired; /* counters of freed streams */
	struct cg_divergence_site sites[CG_SITES];  /* (count 0: free) */
	/* The deferral controller (control.h), guarded by ctl_lock; the hot path reads only the
	 * atomics below it. */
	pthread_mutex_t ctl_lock;
	struct cg_control ctl;
	uint64_t ctl_base;       /* all streams' ops (st.ops, retired included) before the
	                            current interval began; under ctl_lock */
	uint64_t ctl_wait_ns;    /* atomic: the latest wait for the GPU since (0: none) */
	bool ctl_defer;          /* atomic: ctl.defer */
	bool ctl_probing;        /* atomic: ctl.phase == CG_CTL_PROBE */
	bool launched;           /* atomic: a graph has been launched */
	uint64_t timed;          /* atomic: runs timed for the cost gate so far */
	uint64_t ctl_timed;      /* `timed` when the controller last looked */
	uint64_t built;          /* atomic: graphs built so far (each costs its build once) */
	uint64_t ctl_built;      /* `built` when the controller last looked */
};

struct cg_stream {
	struct cg_engine *e;
	void *be_stream;
	uint64_t id;
	uint64_t op_index;          /* ops submitted on this stream so far */
	uint64_t chunk_first;       /* op index of the current chunk's first op */
	struct cg_scratch sc;       /* the current chunk */
	bool deferring;             /* all of sc is deferred and a prefix of every candidate */
	struct cg_chunk *hold;      /* all of sc is held back, a prefix of this learning chunk, for
	                               an eager sample (learn_sample) */
	struct cg_chunk *learn_first[CG_LEARN_FIRST];  /* learning chunks, by their first op */
	uint32_t declined;          /* learning samples the backend declined in a row */
	uint32_t hold_skip;         /* chunk starts to let pass before holding one again */
	struct cg_chunk **cand;
	uint32_t ncand, cand_cap;
	struct cg_chunk *complete;  /* the armed chunk sc equals exactly, if any */
	struct cg_chunk *expect;    /* the candidate that ran at this place before (places) */
	struct cg_chunk *rest;      /* an armed chunk a boundary cut short after its op rest_at: the
	                               ops after the boundary may be its rest; while deferring, sc
	                               is deferred as its ops from rest_at on (no candidates) */
	uint32_t rest_at;
	uint64_t place;             /* where the current chunk runs (0: unknown) */
	bool place_unsure;          /* a flush cut the current chunk, not the program */
	const struct cg_chunk *eager_place;  /* the chunk of this place, running eagerly */
	struct cg_places places;    /* which chunks ran where */
	enum cg_reason why;         /* why the learning chunk runs eagerly (NONE: decided at the cut) */
	uint32_t passed;            /* ops of the learning chunk the caller submitted itself */
	uint32_t len_max;           /* chunks are cut at this length (cfg.chunk_max, or less once
	                               a short loop had a chunk exposed) */
	/* Where exposed chunks are cut (cut_exposed): after split_n[i] ops, where those ops are
	 * the first half of the exposed chunk (their chunk key is split_key[i]). */
	uint64_t split_key[CG_SPLITS];
	uint32_t split_n[CG_SPLITS];
	uint32_t nsplit;
	uint64_t tick;              /* LRU clock */
	uint64_t epoch;             /* program boundaries so far: instance positions restart */
	uint32_t timeouts;          /* deferrals that hit the budget */
	uint64_t just_launched;     /* key of the chunk that ran with no op after it yet (0: none) */
	bool at_boundary;           /* no op since the last boundary (or since it was made) */
	uint64_t budget_ns;         /* atomic: the deferral budget (0: the shim's own) */
	uint64_t budget_peak;       /* longest deferral that completed, over budget_runs */
	uint32_t budget_runs;
	struct cg_index ix;
	struct cg_loop per;       /* where this stream's loop is cut */
	bool length_cut;            /* the chunk being cut reached chunk_max (not pinned) */
	struct cg_op *ops;          /* [chunk_max]: a chunk handed to backend->build */
	uint8_t fallback_events[CG_R_COUNT];
	uint64_t pending_since;     /* atomic: the flusher reads it without the stream lock */
	struct cg_stats st;         /* one writer (the lock holder), read by cg_engine_stats */
	uint64_t ctl_next;          /* st.ops at which control_op next counts every stream's ops */
	struct cg_stream *prev, *next;
};

/* Counters are single-writer: a relaxed load and store (no locked instruction on the hot path)
 * keeps concurrent reads from cg_engine_stats well-defined. */
static inline void stat_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}
#define ST(s, field, v) stat_add(&(s)->st.field, (v))

static void *libc_realloc(void *p, size_t n)
{
	if (!n) {
		free(p);
		return NULL;
	}
	return realloc(p, n);
}

void cg_engine_config_default(struct cg_engine_config *cfg)
{
	*cfg = (struct cg_engine_config){
		.warmup = 2, .chunk_max = 64, .max_graphs = 1024, .fail_limit = 3, .measure = true,
		.budget_cap = 16,
		/* measured on an H200 (CUDA 13.0): cuLaunchKernel 3.4 us of host time, a graph launch 2.5 */
		.launch_host_us = 3.4, .graph_launch_host_us = 2.5,
	};
}

/* ---- events and reasons ---------------------------------------------------------------- */

static void emit(struct cg_stream *s, struct cg_event ev)
{
	if (!s->e->be->event)
		return;
	ev.stream_id = s->id;
	s->e->be->event(s->e->be_ctx, &ev);
}

/* `n` ops ran eagerly because of `r`; `ev` says where (kind and reason are filled in here).
 * An incident is reported once: the rest of a chunk that diverged is only counted. */
static void fallback(struct cg_stream *s, enum cg_reason r, uint32_t n, bool report,
                     struct cg_event ev)
{
	ST(s, fallbacks[r], n);
	if (!report || s->fallback_events[r] >= CG_FALLBACK_EVENTS)
		return;
	s->fallback_events[r]++;
	ev.kind = CG_EV_FALLBACK;
	ev.reason = r;
	emit(s, ev);
}

/* `cost`: what the chunk's timing showed, where that decided (else NULL). */
static void chunk_event_costed(struct cg_stream *s, enum cg_event_kind kind, enum cg_reason r,
                               const struct cg_chunk *t, const struct cg_chunk_cost *cost)
{
	emit(s, (struct cg_event){ .kind = kind, .reason = r, .op_index = s->chunk_first,
	                           .chunk_ops = t->n, .chunk_key = t->key, .cost = cost });
}

static void chunk_event(struct cg_stream *s, enum cg_event_kind kind, enum cg_reason r,
                        const struct cg_chunk *t)
{
	chunk_event_costed(s, kind, r, t, NULL);
}

/* ---- places ---------------------------------------------------------------------------- */

/* Boundaries, or a long loop's iterations, restart the count of a chunk's ends (as its
 * instances, pick_instance). */
static uint64_t place_epoch(const struct cg_stream *s)
{
	return s->epoch + (s->per.period >= s->e->cfg.chunk_max ? s->per.iterations : 0);
}

/* The current chunk ended as `t` (NULL: no template): it ran at this place, and the next chunk
 * runs at the place after it. */
static void chunk_ended(struct cg_stream *s, struct cg_chunk *t)
{
	if (!t) {
		s->place = 0;
		s->place_unsure = false;
		s->eager_place = NULL;
		return;
	}
	if (s->place && !s->place_unsure)
		cg_places_note(&s->places, s->place, t->key, s->ix.nchunks, s->e->mem);
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
static bool place_chunk_ends(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
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

static void push(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	if (!s->sc.n)
		s->chunk_first = s->op_index - 1;
	cg_scratch_push(&s->sc, op, hash, s->e->mem);
}

static void chunk_reset(struct cg_stream *s)
{
	cg_scratch_reset(&s->sc);
	s->why = CG_R_NONE;
	s->passed = 0;
}

static void stop_deferring(struct cg_stream *s)
{
	s->deferring = false;
	s->ncand = 0;
	s->complete = NULL;
	s->expect = NULL;
	s->rest = NULL;
	__atomic_store_n(&s->pending_since, 0, __ATOMIC_RELAXED);
}

/* Submit the deferred ops eagerly, in order. They stay in the scratch as the beginning of a
 * chunk being learned (unless the caller resets it). */
static void run_deferred(struct cg_stream *s)
{
	const struct cg_engine *e = s->e;
	uint32_t n = s->sc.n;
	for (uint32_t i = 0; i < n; i++) {
		struct cg_op op;
		cg_scratch_op(&s->sc, i, &op);
		/* The program was told its launch succeeded; a driver error now has nobody to go
		 * to, exactly as with an asynchronous kernel fault. */
		e->be->eager(e->be_ctx, s->be_stream, &op, NULL);
	}
	ST(s, ops_eager, n);
	ST(s, ops_flushed, n);
	stop_deferring(s);
}

static void submit_deferred(struct cg_stream *s, enum cg_reason r, struct cg_event ev)
{
	uint32_t n = s->sc.n;
	run_deferred(s);
	fallback(s, r, n, true, ev);
}

/* The held ops run eagerly now, in order, and count as if the program had passed them (the
 * chunk being learned goes on as it would have): all of them, or all but the latest when the
 * caller is to submit that one itself (`keep_last`). */
static void release_hold(struct cg_stream *s, bool keep_last)
{
	const struct cg_engine *e = s->e;
	uint32_t n = s->sc.n - (keep_last ? 1 : 0);
	for (uint32_t i = 0; i < n; i++) {
		struct cg_op op;
		cg_scratch_op(&s->sc, i, &op);
		e->be->eager(e->be_ctx, s->be_stream, &op, NULL);
	}
	ST(s, ops_eager, s->sc.n);
	ST(s, ops_flushed, n);
	s->passed = s->sc.n;
	s->hold = NULL;
	__atomic_store_n(&s->pending_since, 0, __ATOMIC_RELAXED);
}

/* ---- graphs ----------------------------------------------------------------------------- */

/* Every instance's graph (through the backend unless the driver is gone). */
static void destroy_instances(struct cg_stream *s, struct cg_chunk *t, bool driver_gone)
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
	destroy_instances(s, t, false);
	/* A chunk that loses its graph can no longer be launched for the deferred ops. */
	uint32_t kept = 0;
	for (uint32_t i = 0; i < s->ncand; i++)
		if (s->cand[i] != t)
			s->cand[kept++] = s->cand[i];
	s->ncand = kept;
	if (s->complete == t)
		s->complete = NULL;
	if (s->expect == t)
		s->expect = NULL;
}

static void disable_costed(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r,
                           const struct cg_chunk_cost *cost)
{
	if (t->graph)
		drop_graph(s, t);
	t->state = CG_CHUNK_DISABLED;
	t->why = r;
	ST(s, chunks_disabled, 1);
	chunk_event_costed(s, CG_EV_CHUNK_DISABLED, r, t, cost);
}

static void disable(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r)
{
	disable_costed(s, t, r, NULL);
}

/* A graph API failed for this chunk: back off exponentially, give up after fail_limit. */
static void chunk_failed(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r)
{
	if (t->graph)
		drop_graph(s, t);
	t->why = r;
	if (++t->fails >= s->e->cfg.fail_limit) {
		disable(s, t, CG_R_DISABLED);
		return;
	}
	t->state = CG_CHUNK_BACKOFF;
	t->skip = 1u << (t->fails < 31 ? t->fails : 31);
}

/* Take a slot under max_graphs. When full, evict this stream's least recently launched graph:
 * other streams' graphs are guarded by their own locks, so they are out of reach. */
static bool reserve_graph(struct cg_stream *s, const struct cg_chunk *keep)
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
static enum cg_reason build(struct cg_stream *s, struct cg_chunk *t, const char **detail)
{
	struct cg_engine *e = s->e;
	if (!reserve_graph(s, NULL))
		return CG_R_MAX_GRAPHS;
	for (uint32_t i = 0; i < t->n; i++)
		cg_scratch_op(&s->sc, i, &s->ops[i]);
	void *graph = NULL;
	if (e->be->build(e->be_ctx, s->be_stream, s->ops, t->n, &graph, detail) != 0) {
		__atomic_fetch_sub(&e->graphs_alive, 1, __ATOMIC_RELAXED);
		emit(s, (struct cg_event){ .kind = CG_EV_BUILD_FAILED, .reason = CG_R_BUILD_FAILED,
		                           .op_index = s->chunk_first, .chunk_ops = t->n,
		                           .chunk_key = t->key, .detail = *detail });
		chunk_failed(s, t, CG_R_BUILD_FAILED);
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
static enum cg_reason learned(struct cg_stream *s, struct cg_chunk *t, uint32_t sightings,
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
		r = build(s, t, detail);
		return r ? r : CG_R_LEARNING;
	case CG_CHUNK_BACKOFF:
		if (t->skip) {
			t->skip--;
			return t->why;
		}
		r = build(s, t, detail);
		return r ? r : t->why;
	case CG_CHUNK_ARMED:
		/* Armed, yet learned: its start was not a chunk start (a divergence or a flush). */
		return CG_R_LEARNING;
	case CG_CHUNK_DISABLED:
		return t->why;
	}
	return CG_R_LEARNING;
}

/* End the learning chunk: find or add its template, let it advance, count its eager ops.
 * `latest`: the chunk ends with the latest op the loop detector saw (not so after a divergence,
 * whose op is not part of it), so the loop can say how often it occurred already. */
static void cut(struct cg_stream *s, bool learn, bool latest)
{
	struct cg_scratch *sc = &s->sc;
	cg_loop_chunk_end(&s->per, !s->length_cut);
	s->length_cut = false;
	if (!sc->n)
		return;
	enum cg_reason r = sc->lossy ? CG_R_NO_MEMORY : CG_R_LEARNING;
	const char *detail = NULL;
	struct cg_chunk *t = NULL;
	if (learn && !sc->lossy) {
		t = cg_index_find(&s->ix, sc);
		if (!t)
			t = cg_index_add(&s->ix, sc);
		if (t)
			r = learned(s, t, latest ? cg_loop_sightings(&s->per, sc->n) : 1, &detail);
		/* Seen now: its next sightings can be held for an eager sample (start_hold). */
		if (t && t->state == CG_CHUNK_LEARNING)
			s->learn_first[t->hash[0] % CG_LEARN_FIRST] = t;
	}
	bool report = s->why == CG_R_NONE;
	if (!report)
		r = s->why;
	if (s->passed)
		fallback(s, r, s->passed, report, (struct cg_event){ .op_index = s->chunk_first,
		         .chunk_ops = sc->n, .chunk_key = t ? t->key : 0, .detail = detail });
	chunk_ended(s, learn ? t : NULL);
	chunk_reset(s);
}

/* ---- replay ----------------------------------------------------------------------------- */

/* A graph for one more position of `t`, built with the deferred ops' own arguments. A failure
 * only means this position shares an instance (and patches more). */
static bool add_instance(struct cg_stream *s, struct cg_chunk *t)
{
	struct cg_engine *e = s->e;
	if (!reserve_graph(s, t))
		return false;
	size_t args = t->args_off[t->n];
	void **xg = e->mem(t->xgraph, t->ninst * sizeof(*xg));
	if (xg)
		t->xgraph = xg;
	unsigned char *xa = xg ? e->mem(t->xargs, t->ninst * args) : NULL;
	if (xa)
		t->xargs = xa;
	void *graph = NULL;
	const char *detail = NULL;
	for (uint32_t i = 0; xa && i < t->n; i++)
		cg_scratch_op(&s->sc, i, &s->ops[i]);
	if (!xa || e->be->build(e->be_ctx, s->be_stream, s->ops, t->n, &graph, &detail) != 0) {
		__atomic_fetch_sub(&e->graphs_alive, 1, __ATOMIC_RELAXED);
		emit(s, (struct cg_event){ .kind = CG_EV_BUILD_FAILED, .reason = CG_R_BUILD_FAILED,
		                           .op_index = s->chunk_first, .chunk_ops = t->n,
		                           .chunk_key = t->key, .detail = detail });
		return false;
	}
	t->xgraph[t->ninst - 1] = graph;
	t->ninst++;
	cg_chunk_hold_inst_args(t, t->ninst - 1, &s->sc);
	ST(s, graphs_built, 1);
	__atomic_fetch_add(&e->built, 1, __ATOMIC_RELAXED);
	return true;
}

/* Which instance runs this occurrence: its position since the last program boundary or, in a
 * loop longer than a chunk, the start of the loop's iteration (a loop with no host sync would
 * otherwise cycle through every instance and hold CG_INSTANCES graphs of each chunk). */
static uint32_t pick_instance(struct cg_stream *s, struct cg_chunk *t)
{
	uint64_t epoch = s->epoch;
	if (s->per.period >= s->e->cfg.chunk_max)
		epoch += s->per.iterations;
	if (t->occ_epoch != epoch) {
		t->occ_epoch = epoch;
		t->occ = 0;
	}
	/* A short loop's unit of 8 ops recurs four times as often as a chunk of 32 would: as many
	 * nodes in all keep every position its own instance (a kernel launched 1000 times). */
	uint32_t most = CG_INSTANCE_OPS / t->n;
	if (most < CG_INSTANCES)
		most = CG_INSTANCES;
	uint32_t k = t->occ++ % most;
	if (k < t->ninst)
		return k;
	if (k == t->ninst && add_instance(s, t))
		return k;
	return k % t->ninst;
}

/* The cost gate's samples (gate.h judges them), timed by the backend on the GPU and returned
 * through cg_stream_timing. Eager ones come first from the chunk's last sightings while it is
 * learned, which run eagerly anyway: their ops are held back (start_hold) and, once the
 * occurrence is complete, submitted in a burst between the backend's events (learn_sample), up
 * to cg_gate_eager_samples() of them, never its first sighting (cold: module loads, first
 * launches). Once its graph has run (its first launch uploads it), the graph's next occurrences are
 * timed, up to CG_TIMING_SAMPLES times; and where learning gave fewer eager samples (the
 * backend declined, a flush or a divergence released the held ops, the loop detector learned
 * the chunk at once), occurrences that could have been replayed run eagerly for them
 * (eager_sample), alternating with the graph's, only while the graph's time says the gate
 * could act on it (each costs the replay of an occurrence). Either way the ops are exactly the
 * program's, run once, in order. The backend may decline a sample (busy, or timing failed): a
 * chunk asks only so often. A sample taken is waited for (up to CG_TIMING_WAIT launches, should
 * it never come back) before the next: it may show the next unneeded. */
#define CG_TIMING_ASKS 12
#define CG_TIMING_WAIT 16

enum timing { UNTIMED, TIME_EAGER, TIME_GRAPH };

static struct cg_gate_costs gate_costs(const struct cg_engine_config *cfg)
{
	return (struct cg_gate_costs){ cfg->launch_host_us, cfg->graph_launch_host_us, cfg->warmup };
}

double cg_engine_launch_saved_us(const struct cg_engine_config *cfg, double ops,
                                 double graph_launches)
{
	struct cg_gate_costs c = gate_costs(cfg);
	return cg_gate_launch_saved_us(&c, ops, graph_launches);
}

static enum timing timing_wanted(struct cg_stream *s, struct cg_chunk *t)
{
	if (!s->e->be->time_begin || !t->launched || t->timing_asks >= CG_TIMING_ASKS ||
	    t->timing_done)
		return UNTIMED;
	if (t->timed_eager + t->timed_graph > t->eager_n + t->graph_n &&
	    t->launched < t->timed_at + CG_TIMING_WAIT)
		return UNTIMED;  /* a sample is out */
	bool eager = t->timed_eager < cg_gate_eager_samples(&s->e->gate) &&
	             cg_gate_plausible(&s->e->gate, t) &&
	             (t->timed_eager < t->timed_graph || t->timed_graph >= CG_TIMING_SAMPLES);
	if (!eager && t->timed_graph >= CG_TIMING_SAMPLES)
		return UNTIMED;
	t->timing_asks++;
	return eager ? TIME_EAGER : TIME_GRAPH;
}

/* A timed eager run of the deferred ops, which are exactly `t`. False: the backend declined. */
static bool eager_sample(struct cg_stream *s, struct cg_chunk *t)
{
	const struct cg_engine *e = s->e;
	if (!e->be->time_begin(e->be_ctx, s->be_stream, t->key, false))
		return false;
	run_deferred(s);
	e->be->time_end(e->be_ctx, s->be_stream, true);
	__atomic_fetch_add(&s->e->timed, 1, __ATOMIC_RELAXED);
	t->timed_eager++;
	t->timed_at = t->launched;
	t->last_used = ++s->tick;
	fallback(s, CG_R_COST_SAMPLE, t->n, false, (struct cg_event){ 0 });
	chunk_ended(s, t);
	chunk_reset(s);
	return true;
}

/* The deferred ops are exactly `t`: patch the arguments that differ from what its graph holds,
 * launch it. On failure nothing ran, so the ops go eagerly, in order. */
/* ---- the deferral budget ------------------------------------------------------------------ */

#define BUDGET_WINDOW 64   /* completed deferrals over which the budget may come down */

/* A chunk timed out: the stream's budget doubles (the flusher reads it for the next one). */
static void budget_timeout(struct cg_stream *s)
{
	const struct cg_engine_config *c = &s->e->cfg;
	uint64_t b = s->budget_ns, cap = c->defer_budget_ns * c->budget_cap;
	if (!b || b >= cap)
		return;
	__atomic_store_n(&s->budget_ns, 2 * b < cap ? 2 * b : cap, __ATOMIC_RELAXED);
	ST(s, budget_raises, 1);
	s->budget_peak = 0;
	s->budget_runs = 0;
}

/* Deferred work is launched as its chunk: how long it waited. Once a window of deferrals all
 * completed within half the budget, the budget comes down to twice the longest of them. */
static void budget_completed(struct cg_stream *s)
{
	uint64_t since = __atomic_load_n(&s->pending_since, __ATOMIC_RELAXED);
	uint64_t b = s->budget_ns, base = s->e->cfg.defer_budget_ns;
	if (!since || b <= base)
		return;
	uint64_t now = s->e->now_ns(), waited = now > since ? now - since : 0;
	if (waited > s->budget_peak)
		s->budget_peak = waited;
	if (++s->budget_runs < BUDGET_WINDOW)
		return;
	if (2 * s->budget_peak < b)
		__atomic_store_n(&s->budget_ns, 2 * s->budget_peak > base ? 2 * s->budget_peak : base,
		                 __ATOMIC_RELAXED);
	s->budget_peak = 0;
	s->budget_runs = 0;
}

static void launch_chunk(struct cg_stream *s, struct cg_chunk *t)
{
	budget_completed(s);
	uint64_t since = __atomic_load_n(&s->pending_since, __ATOMIC_RELAXED);
	if (since && t->span_n < CG_SPAN_RUNS) {
		uint64_t now = s->e->now_ns();
		t->span_us += now > since ? (double)(now - since) / 1e3 : 0;
		t->span_n++;
	}
	s->just_launched = t->key;
	const struct cg_engine *e = s->e;
	const struct cg_scratch *sc = &s->sc;
	const char *detail = NULL;
	enum cg_reason r = CG_R_NONE;
	uint32_t patched = 0;
	uint32_t k = pick_instance(s, t);
	unsigned char *inst_args = cg_chunk_inst_args(t, k);
	void *graph = k ? t->xgraph[k - 1] : t->graph;
	enum timing timing = timing_wanted(s, t);
	if (timing == TIME_EAGER && eager_sample(s, t))
		return;

	for (uint32_t i = 0; i < t->n; i++) {
		unsigned char *held = inst_args + t->args_off[i];
		const unsigned char *now = sc->bytes + sc->args_off[i];
		if (memcmp(held, now, sc->args_len[i]) == 0)
			continue;
		struct cg_op op;
		cg_scratch_op(sc, i, &op);
		if (e->be->patch(e->be_ctx, graph, i, &op, &detail) != 0) {
			r = CG_R_PATCH_FAILED;
			break;
		}
		memcpy(held, now, sc->args_len[i]);
		patched++;
	}
	bool timed = !r && timing == TIME_GRAPH &&
	             e->be->time_begin(e->be_ctx, s->be_stream, t->key, true);
	if (!r && e->be->launch(e->be_ctx, s->be_stream, graph, &detail) != 0)
		r = CG_R_LAUNCH_FAILED;
	if (timed) {
		e->be->time_end(e->be_ctx, s->be_stream, !r);
		__atomic_fetch_add(&s->e->timed, 1, __ATOMIC_RELAXED);
		t->timed_graph += !r;
		t->timed_at = t->launched + 1;
	}
	ST(s, patches, patched);
	if (r) {
		submit_deferred(s, r, (struct cg_event){ .op_index = s->chunk_first, .chunk_ops = t->n,
		                                         .chunk_key = t->key, .detail = detail });
		chunk_failed(s, t, r);
	} else {
		ST(s, ops_replayed, t->n);
		ST(s, graph_launches, 1);
		if (!__atomic_load_n(&s->e->launched, __ATOMIC_RELAXED))
			__atomic_store_n(&s->e->launched, true, __ATOMIC_RELAXED);
		t->launched++;
		t->last_used = ++s->tick;
		stop_deferring(s);
	}
	chunk_ended(s, t);
	chunk_reset(s);
}

/* The deferred ops grew by one: launch a chunk they complete unless a longer one may follow,
 * and not wait for a longer one where the complete one is what ran at this place before (a
 * longer one that then stopped matching would cost the deferred ops a divergence). */
static void after_match(struct cg_stream *s)
{
	s->complete = NULL;
	for (uint32_t i = 0; i < s->ncand; i++)
		if (s->cand[i]->n == s->sc.n)
			s->complete = s->cand[i];
	if (s->complete && (s->ncand == 1 || s->complete == s->expect)) {
		if (s->ncand > 1)
			ST(s, place_launches, 1);
		launch_chunk(s, s->complete);
	}
}

static bool grow_cand(struct cg_stream *s)
{
	uint32_t cap = s->cand_cap * 2;
	struct cg_chunk **p = s->e->mem(s->cand, cap * sizeof(*p));
	if (!p)
		return false;
	s->cand = p;
	s->cand_cap = cap;
	return true;
}

/* Work is pending from now: the flusher's budget counts from here. */
static void mark_pending(struct cg_stream *s)
{
	uint64_t now = s->e->now_ns();
	__atomic_store_n(&s->pending_since, now ? now : 1, __ATOMIC_RELAXED);
}

/* The op is the first deferred one. */
static void begin_deferring(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	push(s, op, hash);
	s->deferring = true;
	mark_pending(s);
}

/* At a chunk start: defer the op if it starts one or more armed chunks, unless the chunk that
 * ran at this place lately starts with it too and has no graph (disabled, learning, evicted):
 * an armed chunk that starts alike elsewhere (another layer, the backward pass) would only
 * make the deferred ops diverge where that one continues. The one that ran here is the
 * candidate preferred. `here`, `margin`: that chunk's key and lead (cg_places_predict; 0: none). */
static bool start_deferral(struct cg_stream *s, const struct cg_op *op, uint64_t hash,
                           uint64_t here, uint32_t margin)
{
	uint32_t need = 0;
	s->ncand = 0;
	s->expect = NULL;
	for (struct cg_chunk *t = cg_index_armed(&s->ix, hash); t; t = t->armed_next) {
		if (!cg_chunk_op_matches(t, 0, op, hash))
			continue;
		if (s->ncand == s->cand_cap && !grow_cand(s))
			break;  /* fewer candidates only means more eager work */
		s->cand[s->ncand++] = t;
		if (t->key == here)
			s->expect = t;
		if (cg_chunk_bytes(t) > need)
			need = cg_chunk_bytes(t);
	}
	if (!s->ncand)
		return false;
	/* The chunk of this place has no graph: a candidate that it begins with completes here
	 * (prefer the longest such). None does: they can only diverge, so once this place is
	 * settled (a chunk learned from wherever a flush or a divergence left the deferred ops,
	 * different every time, is no reason to stay eager), its ops run eagerly as that chunk. */
	if (here && !s->expect) {
		const struct cg_chunk *t = cg_index_find_key(&s->ix, here);
		if (t && t->state != CG_CHUNK_ARMED && cg_chunk_op_matches(t, 0, op, hash)) {
			for (uint32_t i = 0; i < s->ncand; i++)
				if (cg_chunk_begins(t, s->cand[i]) &&
				    (!s->expect || s->cand[i]->n > s->expect->n))
					s->expect = s->cand[i];
			/* Settled too: a place where a chunk still learning came at each sighting so far,
			 * unrivalled. Deferred, its next sighting (the one that arms it, at the default
			 * warmup) would only diverge, or be cut by the boundary that ends it while still a
			 * prefix, and lose the eager sample its learning holds it for. */
			bool settled = margin >= CG_PLACE_SETTLED ||
			               (t->state == CG_CHUNK_LEARNING && margin >= t->seen);
			if (!s->expect && settled) {
				ST(s, place_eager, 1);
				s->ncand = 0;
				s->eager_place = t;
				return false;
			}
		}
	}
	/* Room for the longest candidate now, so that deferred ops are never lost to memory. */
	if (!cg_scratch_reserve(&s->sc, need, s->e->mem)) {
		/* Reported here; the chunk's ops are counted when it is cut. */
		s->ncand = 0;
		s->why = CG_R_NO_MEMORY;
		fallback(s, CG_R_NO_MEMORY, 0, true, (struct cg_event){ .op_index = s->op_index - 1 });
		return false;
	}
	begin_deferring(s, op, hash);
	after_match(s);
	return true;
}

/* While deferring: keep the candidates whose next op is this one. False when none is left. */
static bool follow(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	uint32_t pos = s->sc.n, kept = 0;
	bool expect_kept = false;  /* `expect` is always one of the candidates: matched once */
	for (uint32_t i = 0; i < s->ncand; i++) {
		struct cg_chunk *t = s->cand[i];
		if (t->n > pos && cg_chunk_op_matches(t, pos, op, hash)) {
			s->cand[kept++] = t;
			expect_kept |= t == s->expect;
		}
	}
	if (!kept)
		return false;  /* nothing was overwritten: cand[] still names the old candidates */
	if (!expect_kept)
		s->expect = NULL;
	s->ncand = kept;
	push(s, op, hash);
	after_match(s);
	return true;
}

/* A site's name for an op: its kernel name (copied: the site outlives the stream) or hash. */
static void site_name(char *to, const struct cg_op *op)
{
	if (!op) {
		to[0] = 0;
		return;
	}
	if (!op->name) {
		static const char hex[] = "0123456789abcdef";
		to[0] = '#';
		for (int i = 0; i < 16; i++)
			to[1 + i] = hex[(op->hash >> (60 - 4 * i)) & 15];
		to[17] = 0;
		return;
	}
	size_t n = strlen(op->name);
	if (n >= CG_SITE_NAME)
		n = CG_SITE_NAME - 1;
	memcpy(to, op->name, n);
	to[n] = 0;
}

/* One more divergence at this site; a new site takes the place of the least frequent one
 * when all are taken (the sites that keep diverging stay). */
static void note_site(struct cg_engine *e, const struct cg_op *expected, const struct cg_op *got,
                      uint32_t at, uint32_t ops)
{
	struct cg_divergence_site site = { .count = 1, .at = at, .ops = ops };
	site_name(site.expected, expected);
	site_name(site.got, got);
	pthread_mutex_lock(&e->lock);
	struct cg_divergence_site *least = &e->sites[0];
	for (uint32_t i = 0; i < CG_SITES; i++) {
		struct cg_divergence_site *t = &e->sites[i];
		if (t->count && t->at == at && t->ops == ops && strcmp(t->expected, site.expected) == 0 &&
		    strcmp(t->got, site.got) == 0) {
			t->count++;
			pthread_mutex_unlock(&e->lock);
			return;
		}
		if (t->count < least->count)
			least = t;
	}
	*least = site;
	pthread_mutex_unlock(&e->lock);
}

/* No candidate continues with `op` and none is complete: the deferred ops run eagerly and stay
 * the start of the chunk being learned, so that this variant is learned with its own prefix
 * and later matched through it. */
static void diverge(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	uint32_t pos = s->sc.n, ops = 0;
	struct cg_op expected = { 0 };
	for (uint32_t i = 0; i < s->ncand; i++) {
		const struct cg_chunk *t = s->cand[i];
		if (t->n > pos) {
			ops = t->n;
			expected = (struct cg_op){ .sig = t->sig + t->sig_off[pos],
			    .sig_len = t->sig_off[pos + 1] - t->sig_off[pos],
			    .args = t->args + t->args_off[pos],
			    .args_len = t->args_off[pos + 1] - t->args_off[pos],
			    .hash = t->hash[pos], .name = t->name[pos] };
			break;
		}
	}
	struct cg_op got = *op;
	got.hash = hash;
	ST(s, divergences, 1);
	note_site(s->e, expected.sig ? &expected : NULL, &got, pos, ops);
	submit_deferred(s, CG_R_DIVERGENCE, (struct cg_event){ .op_index = s->op_index - 1,
	                .chunk_ops = pos, .expected = expected.sig ? &expected : NULL, .got = &got });
	s->why = CG_R_DIVERGENCE;
	/* The deferred ops end where the loop is cut (loop.c): they are a chunk of their own, as
	 * they are where they were learned, so that the cuts after them stay in step. */
	if (cg_loop_cut_before(&s->per))
		cut(s, true, false);
}

/* A unit of a short loop ends here, after ops that are no part of it (the stretch before the
 * loop was found, extra work): they ran eagerly and are forgotten, so that the unit is learned
 * as the chunk it will be. The flushed ops come first in the scratch, then the passed ones. */
static void drop_front(struct cg_stream *s, uint32_t k)
{
	uint32_t flushed = s->sc.n - s->passed;
	uint32_t passed = k > flushed ? k - flushed : 0;
	if (passed)
		fallback(s, s->why != CG_R_NONE ? s->why : CG_R_LEARNING, passed, false,
		         (struct cg_event){ 0 });
	s->passed -= passed;
	s->chunk_first += k;
	cg_scratch_drop_front(&s->sc, k);
}

/* Is the chunk learned so far the first half of an exposed chunk (cut_exposed)? */
static bool split_here(const struct cg_stream *s)
{
	for (uint32_t i = 0; i < s->nsplit; i++)
		if (s->split_n[i] == s->sc.n && s->split_key[i] == cg_scratch_key(&s->sc))
			return true;
	return false;
}

/* ---- eager samples from learning ------------------------------------------------------- */

/* Would an occurrence of learning chunk `t` now be one of its last sightings before its graph,
 * not its first, with an eager sample still to take? */
static bool wants_learning_sample(const struct cg_engine *e, const struct cg_chunk *t)
{
	uint32_t want = cg_gate_eager_samples(&e->gate);
	return t->state == CG_CHUNK_LEARNING && t->seen >= 1 && t->timed_eager < want &&
	       t->seen + want >= e->cfg.warmup;
}

/* At a chunk start that no armed chunk takes: if the chunk that ran at this place, or else the
 * learning chunk last seen starting with this op, is one that wants an eager sample, hold its
 * ops back as they come (the program is told they were launched, as with a deferral), so that
 * the occurrence can run as a burst between the backend's events once complete. Learning goes
 * on as if they had passed: where it cuts elsewhere, or an op differs, or a boundary or the
 * flusher comes first, they run eagerly as they are (release_hold). A stream whose samples the
 * backend keeps declining (a per-thread stream of another thread, timing off) holds only now
 * and then, to see whether that changed (samples not read back yet fill the backend's slots
 * for a while): the hold only delays its ops. */
static void start_hold(struct cg_stream *s, const struct cg_op *op, uint64_t hash,
                       uint64_t here)
{
	struct cg_engine *e = s->e;
	if (!e->be->time_begin || s->why != CG_R_NONE)
		return;
	struct cg_chunk *t = here ? cg_index_find_key(&s->ix, here) : NULL;
	if (!t || !cg_chunk_op_matches(t, 0, op, hash)) {
		t = s->learn_first[hash % CG_LEARN_FIRST];
		if (!t || !cg_chunk_op_matches(t, 0, op, hash))
			return;
	}
	if (!wants_learning_sample(e, t))
		return;
	if (s->hold_skip) {
		s->hold_skip--;
		return;
	}
	/* Room for the whole chunk now, so that held ops are never lost to memory (the ops that
	 * match it have its sizes). */
	if (!cg_scratch_reserve(&s->sc, cg_chunk_bytes(t), e->mem))
		return;
	s->hold = t;
	mark_pending(s);
}

/* The held ops are exactly the chunk held for, and learning ends its occurrence here: they run
 * in a burst between the backend's events, as a replayed occurrence's eager sample does
 * (eager_sample), and count as learning. */
static void learn_sample(struct cg_stream *s)
{
	struct cg_engine *e = s->e;
	struct cg_chunk *t = s->hold;
	bool timed = e->be->time_begin(e->be_ctx, s->be_stream, t->key, false);
	release_hold(s, false);
	if (!timed) {
		if (++s->declined >= CG_HOLD_DECLINED)
			s->hold_skip = CG_HOLD_SKIP;
		return;
	}
	e->be->time_end(e->be_ctx, s->be_stream, true);
	s->declined = 0;
	__atomic_fetch_add(&e->timed, 1, __ATOMIC_RELAXED);
	t->timed_eager++;
	t->learn_samples++;
	ST(s, learning_samples, 1);
	t->timed_at = t->launched;
}

/* The op runs eagerly (the caller submits it, unless it is held) and is learned. */
static enum cg_verdict learn(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	const struct cg_engine *e = s->e;
	const struct cg_chunk *h = s->hold;
	bool held = h && s->sc.n < h->n && cg_chunk_op_matches(h, s->sc.n, op, hash);
	if (h && !held)
		release_hold(s, false);
	push(s, op, hash);
	if (!held) {
		s->passed++;
		ST(s, ops_eager, 1);
	}
	uint32_t n = s->sc.n;
	/* Where an eager run at a place ends (its chunk's last op), asked before a short loop's
	 * unit drops what came before it. */
	bool place = place_chunk_ends(s, op, hash);
	/* A loop no longer than a chunk is cut at its units only (loop.h): a content-defined cut
	 * would make its chunks longer or shorter than a unit, or out of step with it. */
	bool content = !s->per.unit && n >= e->chunk_min && (hash >> 32) < e->cdc_below;
	if (s->per.cut && s->per.unit && n > s->per.unit) {
		if (s->hold)
			release_hold(s, true);
		drop_front(s, n - s->per.unit);
	}
	/* Before a short loop's first unit ends, what comes before it can go, not the unit. */
	if (n >= e->cfg.chunk_max && s->per.unit && s->per.due_at != UINT64_MAX) {
		uint64_t start = s->per.due_at + 1 - s->per.unit;
		if (start > s->chunk_first && start - s->chunk_first < n) {
			if (s->hold)
				release_hold(s, true);
			drop_front(s, (uint32_t)(start - s->chunk_first));
		}
		n = s->sc.n;
	}
	/* A unit's cut where the chunk is shorter than a unit: a cut made before the loop was
	 * found (by content) fell inside its first unit. Cut there too, the loop would replay in
	 * graphs of that part's length for good (a loop of one kernel in graphs of 18, not 32);
	 * the part runs on to the next anchor cut, a unit later, and its front is dropped there. */
	bool unit_cut = s->per.cut && !(s->per.unit && n < s->per.unit);
	bool split = !s->per.unit && split_here(s);
	bool ends = content || unit_cut || place || split || n >= s->len_max;
	enum cg_verdict v = CG_PASS;
	if (s->hold) {
		/* (a chunk cut by a boundary is complete when the boundary comes) */
		if (!ends && n <= s->hold->n)
			return CG_TAKEN;
		if (ends && n == s->hold->n) {
			learn_sample(s);  /* runs this op too */
			v = CG_TAKEN;
		} else {
			release_hold(s, true);
		}
	}
	if (ends) {
		s->length_cut = !content && !unit_cut && !place && !split;
		cut(s, true, true);
	}
	return v;
}

/* ---- the deferral controller ------------------------------------------------------------ */

/* One op of the program: counted; the first op after waits for the GPU, or the last of a
 * window without one, ends an interval of the program's time for the controller. Whatever
 * stream's op closes it reports what a finished probe decided. */
#define CG_CTL_BATCH 32  /* a stream's ops between two looks at every stream's count */

/* Ops submitted over every stream so far (freed streams included). */
static uint64_t ops_total(struct cg_engine *e)
{
	pthread_mutex_lock(&e->lock);
	uint64_t n = e->retired.ops;
	for (const struct cg_stream *s = e->streams; s; s = s->next)
		n += __atomic_load_n(&s->st.ops, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&e->lock);
	return n;
}

static void control_op(struct cg_stream *s)
{
	struct cg_engine *e = s->e;
	/* No shared count per op (a locked instruction on every launch): the streams' own op
	 * counts are summed at the first op after a wait, and where the window could be full, at
	 * most every CG_CTL_BATCH ops of a stream. An interval that a wait ends counts what it
	 * did; one that the window ends counts a window's ops exactly, whatever the other streams
	 * submitted before their next look (that counts in the next interval). */
	if (s->st.ops < s->ctl_next && !__atomic_load_n(&e->ctl_wait_ns, __ATOMIC_RELAXED))
		return;
	uint64_t total = ops_total(e);
	struct cg_control_decision d;
	bool decided = false;
	pthread_mutex_lock(&e->ctl_lock);
	uint64_t wait = __atomic_exchange_n(&e->ctl_wait_ns, 0, __ATOMIC_RELAXED);
	uint64_t since = total > e->ctl_base ? total - e->ctl_base : 0;
	uint32_t n = since < UINT32_MAX ? (uint32_t)since : UINT32_MAX;
	/* After waits, this op is the next interval's first. */
	if (wait)
		e->ctl_base = total - 1;
	else if (n >= e->ctl.window)
		e->ctl_base += e->ctl.window;
	if (wait || n >= e->ctl.window) {
		if (!wait)
			n = e->ctl.window;
		uint64_t end = wait ? wait : e->now_ns();
		/* Graphs settled: in use, and none timed for the cost gate (a timed sample runs a
		 * chunk eagerly, with events, while its mode says graphs) or built (instantiation
		 * costs the host once) in this interval. */
		uint64_t timed = __atomic_load_n(&e->timed, __ATOMIC_RELAXED);
		uint64_t built = __atomic_load_n(&e->built, __ATOMIC_RELAXED);
		bool settled = __atomic_load_n(&e->launched, __ATOMIC_RELAXED) &&
		               timed == e->ctl_timed && built == e->ctl_built;
		e->ctl_timed = timed;
		e->ctl_built = built;
		decided = cg_control_interval(&e->ctl, wait ? (n ? n - 1 : 0) : n, end, wait != 0,
		                              settled, &d);
		__atomic_store_n(&e->ctl_probing, e->ctl.phase == CG_CTL_PROBE, __ATOMIC_RELAXED);
		__atomic_store_n(&e->ctl_defer, e->ctl.defer, __ATOMIC_RELAXED);
	}
	since = total > e->ctl_base ? total - e->ctl_base : 0;
	uint64_t room = since < e->ctl.window ? e->ctl.window - since : 1;
	s->ctl_next = s->st.ops + (room < CG_CTL_BATCH ? room : CG_CTL_BATCH);
	pthread_mutex_unlock(&e->ctl_lock);
	if (decided)
		emit(s, (struct cg_event){ .kind = CG_EV_DECISION, .op_index = s->op_index - 1,
		                           .decision = &d });
}

static void control_wait(struct cg_engine *e)
{
	uint64_t now = e->now_ns();
	__atomic_store_n(&e->ctl_wait_ns, now ? now : 1, __ATOMIC_RELAXED);
}

static bool control_defers(const struct cg_engine *e)
{
	return !e->cfg.measure || __atomic_load_n(&e->ctl_defer, __ATOMIC_RELAXED);
}

/* The controller keeps the program eager for now: ops that would start an armed chunk run as
 * submitted, counted under the controller's reason. */
static void control_eager(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	for (struct cg_chunk *t = cg_index_armed(&s->ix, hash); t; t = t->armed_next)
		if (cg_chunk_op_matches(t, 0, op, hash)) {
			s->why = __atomic_load_n(&s->e->ctl_probing, __ATOMIC_RELAXED) ? CG_R_PROBE
			                                                                : CG_R_MEASURED;
			return;
		}
}

/* ---- pieces of armed chunks ------------------------------------------------------------ */

/* The deferred ops are a piece of an armed chunk that the program's boundaries cut out of it
 * (its first ops, before a host copy every few steps mid-step; or its rest, after one): they
 * have occurred as often as it has, at least `warmup` times. They become a chunk of their own
 * with a graph now, built from them and launched in their place (complete), instead of running
 * eagerly and being learned again, piece by piece. */
static void arm_piece(struct cg_stream *s)
{
	uint32_t seen = s->rest && s->rest->state == CG_CHUNK_ARMED ? s->rest->seen : 0;
	for (uint32_t i = 0; i < s->ncand; i++)
		if (s->cand[i]->seen > seen)
			seen = s->cand[i]->seen;
	if (seen < s->e->cfg.warmup || s->sc.lossy || s->e->cfg.record_only)
		return;
	struct cg_chunk *t = cg_index_find(&s->ix, &s->sc);
	if (!t)
		t = cg_index_add(&s->ix, &s->sc);
	if (!t || t->state != CG_CHUNK_LEARNING)
		return;  /* (an idle one was dropped for room or a build failed: learned as usual) */
	const char *detail = NULL;
	learned(s, t, seen, &detail);
	if (t->state == CG_CHUNK_ARMED)
		s->complete = t;
}

/* The deferred ops, a piece of `rest`, run eagerly and stay the start of the chunk being
 * learned (they were no more than a guess). */
static void rest_eager(struct cg_stream *s)
{
	uint32_t n = s->sc.n;
	run_deferred(s);
	fallback(s, CG_R_LEARNING, n, false, (struct cg_event){ 0 });
}

/* The deferred rest grew by one op: once it is complete, the piece runs as its own graph, or
 * eagerly where it has none. */
static void rest_grew(struct cg_stream *s)
{
	if (s->rest_at + s->sc.n < s->rest->n)
		return;
	arm_piece(s);
	if (s->complete)
		launch_chunk(s, s->complete);
	else
		rest_eager(s);
}

/* The first op after a boundary that cut `rest` short, no armed chunk starting with it: when it
 * is the op that chunk continues with, it is deferred as the start of the chunk's rest. */
static bool start_rest(struct cg_stream *s, struct cg_chunk *rest, uint32_t at,
                       const struct cg_op *op, uint64_t hash)
{
	if (!rest || at >= rest->n || !cg_chunk_op_matches(rest, at, op, hash))
		return false;
	if (!cg_scratch_reserve(&s->sc, cg_chunk_bytes(rest), s->e->mem))
		return false;
	s->ncand = 0;
	s->rest = rest;
	s->rest_at = at;
	begin_deferring(s, op, hash);
	rest_grew(s);
	return true;
}

/* While deferring the rest of a chunk: does the op continue it? */
static bool follow_rest(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	const struct cg_chunk *t = s->rest;
	uint32_t pos = s->rest_at + s->sc.n;
	if (pos >= t->n || !cg_chunk_op_matches(t, pos, op, hash))
		return false;
	push(s, op, hash);
	rest_grew(s);
	return true;
}

enum cg_verdict cg_submit(struct cg_stream *s, const struct cg_op *op)
{
	uint64_t hash = op->hash ? op->hash : cg_sig_hash(op->sig, op->sig_len);
	s->op_index++;
	s->just_launched = 0;
	s->at_boundary = false;
	ST(s, ops, 1);
	if (s->e->cfg.measure)
		control_op(s);
	cg_loop_push(&s->per, hash, s->e->mem);
	if (s->deferring && s->rest) {
		if (follow_rest(s, op, hash))
			return CG_TAKEN;
		rest_eager(s);
		return learn(s, op, hash);
	}
	if (s->deferring) {
		if (follow(s, op, hash))
			return CG_TAKEN;
		if (!s->complete) {
			diverge(s, op, hash);
			return learn(s, op, hash);
		}
		launch_chunk(s, s->complete);  /* then `op` starts a chunk */
		s->just_launched = 0;
	}
	/* A boundary's rest is for the op right after it. */
	struct cg_chunk *rest = s->rest;
	s->rest = NULL;
	if (!s->sc.n && !s->e->cfg.record_only) {
		if (control_defers(s->e)) {
			/* the chunk that ran at this place lately, which both ask after */
			uint32_t margin = 0;
			uint64_t here = s->place ? cg_places_predict(&s->places, s->place, &margin) : 0;
			if (start_deferral(s, op, hash, here, margin) ||
			    start_rest(s, rest, s->rest_at, op, hash))
				return CG_TAKEN;
			start_hold(s, op, hash, here);
		} else {
			control_eager(s, op, hash);
		}
	}
	return learn(s, op, hash);
}

/* Pending work must go now: as its graph when it is exactly an armed chunk, else eagerly (and
 * it then continues as a learning chunk). */
static void end_deferral(struct cg_stream *s, enum cg_reason why)
{
	if (s->complete) {
		launch_chunk(s, s->complete);
		return;
	}
	submit_deferred(s, why, (struct cg_event){ .op_index = s->chunk_first, .chunk_ops = s->sc.n });
	s->why = why;
}

void cg_boundary(struct cg_stream *s, enum cg_reason why)
{
	ST(s, boundaries, 1);
	if (!s->at_boundary)
		cg_loop_boundary(&s->per);
	s->epoch++;
	/* The chunk the deferred ops were cut out of: what follows may be its rest (deferring a
	 * rest already, or no op since the boundary that cut it: the rest goes on). */
	struct cg_chunk *rest = s->rest;
	uint32_t at = (rest ? s->rest_at : 0) + s->sc.n;
	for (uint32_t i = 0; s->deferring && i < s->ncand; i++)  /* (none while deferring a rest) */
		if (s->cand[i]->n > at && (!rest || s->cand[i] == s->expect))
			rest = s->cand[i];
	if (s->deferring && !s->complete)
		arm_piece(s);
	if (s->deferring)
		end_deferral(s, why);
	if (s->hold && s->sc.n == s->hold->n)
		learn_sample(s);  /* the held chunk ends here, as it did when it was seen */
	else if (s->hold)
		release_hold(s, false);
	cut(s, true, true);
	if (s->e->cfg.measure && (why == CG_R_SYNC || why == CG_R_HOST_COPY))
		control_wait(s->e);
	/* The host now waits for the chunk that just ran (see cg_stream_timing: EXPOSED). */
	if ((why == CG_R_SYNC || why == CG_R_HOST_COPY) && s->just_launched) {
		struct cg_chunk *t = cg_index_find_key(&s->ix, s->just_launched);
		if (t)
			t->waits++;
		s->just_launched = 0;  /* marked (a later wait would mark it again, to no effect) */
	}
	s->at_boundary = true;
	s->rest = rest && at < rest->n ? rest : NULL;
	s->rest_at = at;
}

/* A chunk launched right before (other boundaries between, such as event records) is still to
 * be marked by the next wait: the stream is not settled until then. */
bool cg_stream_settled(const struct cg_stream *s)
{
	return cg_stream_calm(s) == CG_SETTLED;
}

enum cg_calm cg_stream_calm(const struct cg_stream *s)
{
	if (!s->at_boundary || s->deferring || s->hold)
		return CG_BUSY;
	return s->just_launched ? CG_QUIET : CG_SETTLED;
}

void cg_engine_note_wait(struct cg_engine *e)
{
	if (e->cfg.measure)
		control_wait(e);
}

/* The deferred ops waited the whole deferral budget for their chunk to complete. Once in a
 * while that is the host being preempted; when a chunk keeps timing out, the program submits
 * it more slowly than the budget allows (a Python training loop). Such chunks stop deferring,
 * and the part that did arrive becomes a chunk of its own, built and launched now, so that its
 * next occurrence completes within the budget. */
#define TIMEOUTS_BEFORE_SPLIT 3

/* Whether a stream whose deferrals keep timing out should defer at all is the controller's
 * call: it measures what the timeouts cost the program (control.h). */
static bool split_on_timeout(struct cg_stream *s)
{
	uint32_t p = s->sc.n;
	bool all_slow = true;
	s->timeouts++;
	for (uint32_t i = 0; i < s->ncand; i++) {
		struct cg_chunk *t = s->cand[i];
		t->timeouts++;
		all_slow &= t->timeouts >= TIMEOUTS_BEFORE_SPLIT && t->timeouts * 4 > t->launched;
	}
	if (!all_slow)
		return false;
	while (s->ncand)
		disable(s, s->cand[0], CG_R_TIMEOUT);  /* drops it from the candidates */
	if (p < 2 || s->sc.lossy)
		return false;  /* a one-op graph saves nothing */
	struct cg_chunk *pre = cg_index_find(&s->ix, &s->sc);
	if (!pre)
		pre = cg_index_add(&s->ix, &s->sc);
	if (!pre || (pre->state != CG_CHUNK_LEARNING && pre->state != CG_CHUNK_IDLE))
		return false;
	const char *detail = NULL;
	pre->state = CG_CHUNK_IDLE;
	pre->seen = s->e->cfg.warmup;
	ST(s, chunks_learned, 1);
	if (build(s, pre, &detail) != CG_R_NONE)
		return false;
	launch_chunk(s, pre);
	return true;
}

bool cg_flush(struct cg_stream *s, enum cg_reason why)
{
	/* Held for a sample: the ops run as they are, and learning goes on (no deferral of the
	 * program's timed out: the budget and the chunks' timeouts stay as they are). */
	if (s->hold) {
		release_hold(s, false);
		return true;
	}
	if (!s->deferring)
		return false;
	if (why == CG_R_TIMEOUT)
		budget_timeout(s);
	if (why == CG_R_TIMEOUT && !s->complete && !s->rest && !s->e->cfg.record_only &&
	    split_on_timeout(s))
		return true;
	/* The chunk these ops end up in is cut where the host was slow, or another thread made a
	 * boundary: it is no lesson for this place. */
	s->place_unsure = !s->complete;
	end_deferral(s, why);
	return true;
}

bool cg_stream_pending(const struct cg_stream *s)
{
	return __atomic_load_n(&s->pending_since, __ATOMIC_RELAXED) != 0;
}

bool cg_stream_held(const struct cg_stream *s)
{
	return s->hold != NULL;
}

uint64_t cg_stream_defer_budget_ns(const struct cg_stream *s)
{
	return __atomic_load_n(&s->budget_ns, __ATOMIC_RELAXED);
}

uint64_t cg_stream_pending_since(const struct cg_stream *s)
{
	return __atomic_load_n(&s->pending_since, __ATOMIC_RELAXED);
}

/* An exposed chunk (below) is learned again in two parts, cut after its first half wherever
 * those ops come as a chunk's first ones: the first part's graph starts on the GPU while the
 * host still submits the rest, and only the last part's time is waited for whole; that part is
 * timed and judged as a chunk of its own, and cut again if exposed in turn, down to
 * CG_SPLIT_MIN ops, so that what stays eager before the wait is a few ops (a Python loop's last
 * ops before `.item()`), not half a chunk. The cut is where that chunk's half ends, not after
 * every op like its middle one: a kernel that recurs all over the loop would cut every chunk
 * short. A short loop with an exposed chunk (its whole unit, or a chunk learned before its
 * period was found) is also cut at half its unit's length from then on, at its period's
 * anchor, instead of at its units. */
static void cut_exposed(struct cg_stream *s, const struct cg_chunk *t)
{
	if (t->n < 2 * CG_SPLIT_MIN)
		return;
	bool cut = false;
	if (s->per.unit) {
		uint32_t unit = s->per.unit;
		cg_loop_no_units(&s->per);
		s->len_max = (t->n > unit ? t->n : unit) / 2;
		cut = true;
	}
	uint32_t half = t->n / 2;
	uint64_t key = cg_chunk_prefix_key(t, half);
	bool known = false;
	for (uint32_t i = 0; i < s->nsplit; i++)
		known |= s->split_n[i] == half && s->split_key[i] == key;
	if (!known && s->nsplit < CG_SPLITS) {
		s->split_key[s->nsplit] = key;
		s->split_n[s->nsplit++] = half;
		cut = true;
	}
	if (cut)
		ST(s, exposed_splits, 1);
}

void cg_stream_timing(struct cg_stream *s, uint64_t chunk_key, bool graph, double us)
{
	struct cg_chunk *t = cg_index_find_key(&s->ix, chunk_key);
	if (!t || t->state == CG_CHUNK_DISABLED)
		return;
	double *least = graph ? &t->graph_us : &t->eager_us;
	uint32_t *n = graph ? &t->graph_n : &t->eager_n;
	if (!*n || us < *least)
		*least = us;
	++*n;
	if (!t->graph_n)
		return;
	struct cg_gate_verdict v;
	cg_gate_judge(&s->e->gate, t, &v);
	if (v.settled)
		t->timing_done = true;
	enum cg_reason r = v.reason;
	if (r == CG_R_NONE)
		return;
	struct cg_chunk_cost cost = { .graph_us = v.graph_us, .eager_us = v.eager_us,
	                              .saved_us = v.saved_us, .span_us = cg_gate_span_us(t),
	                              .exposure_us = v.exposure_us, .waited_share = v.waited_share };
	disable_costed(s, t, r, &cost);
	if (r == CG_R_EXPOSED)
		cut_exposed(s, t);
	if (s->deferring && !s->ncand && !s->complete)
		end_deferral(s, r);
}

/* ---- engine and streams ----------------------------------------------------------------- */

struct cg_engine *cg_engine_new(const struct cg_engine_config *cfg,
                                const struct cg_backend *be, void *be_ctx)
{
	cg_realloc_fn mem = cfg->realloc_fn ? cfg->realloc_fn : libc_realloc;
	struct cg_engine *e = mem(NULL, sizeof(*e));
	if (!e)
		return NULL;
	memset(e, 0, sizeof(*e));
	e->cfg = *cfg;
	e->mem = mem;
	if (e->cfg.chunk_max < 1)
		e->cfg.chunk_max = 1;
	if (e->cfg.chunk_max > 65536)
		e->cfg.chunk_max = 65536;
	if (e->cfg.warmup < 1)
		e->cfg.warmup = 1;
	if (e->cfg.fail_limit < 1)
		e->cfg.fail_limit = 1;
	e->gate = gate_costs(&e->cfg);
	/* Expected chunk length ~ chunk_max / 2: at least chunk_min ops, then a cut with
	 * probability 1 / cdc_mod per op. */
	e->chunk_min = e->cfg.chunk_max / 4 > 4 ? e->cfg.chunk_max / 4 : 4;
	uint32_t cdc_mod = e->cfg.chunk_max / 2 > e->chunk_min ? e->cfg.chunk_max / 2 - e->chunk_min : 1;
	e->cdc_below = (1ull << 32) / cdc_mod;
	e->be = be;
	e->be_ctx = be_ctx;
	e->now_ns = cg_monotonic_ns;
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->ctl_lock, NULL);
	cg_control_init(&e->ctl);
	e->ctl_defer = e->ctl.defer;
	return e;
}

void cg_engine_set_clock(struct cg_engine *e, uint64_t (*now_ns)(void))
{
	e->now_ns = now_ns ? now_ns : cg_monotonic_ns;
}

uint64_t cg_engine_now(const struct cg_engine *e)
{
	return e->now_ns();
}

struct cg_stream *cg_stream_new(struct cg_engine *e, void *be_stream, uint64_t id)
{
	struct cg_stream *s = e->mem(NULL, sizeof(*s));
	if (!s)
		return NULL;
	memset(s, 0, sizeof(*s));
	s->e = e;
	s->be_stream = be_stream;
	s->id = id;
	s->cand_cap = 8;
	s->at_boundary = true;
	s->budget_ns = e->cfg.defer_budget_ns;
	s->len_max = e->cfg.chunk_max;
	s->place = cg_place_after(0, 0);  /* the stream's first chunk */
	/* a loop longer than a chunk: anchor cuts at least half the longest chunk apart */
	cg_loop_init(&s->per, e->cfg.chunk_max / 2, e->cfg.chunk_max, e->cfg.warmup);
	s->cand = e->mem(NULL, s->cand_cap * sizeof(*s->cand));
	s->ops = e->mem(NULL, e->cfg.chunk_max * sizeof(*s->ops));
	bool sc_ok = cg_scratch_init(&s->sc, e->cfg.chunk_max, e->mem);
	bool ix_ok = sc_ok && cg_index_init(&s->ix, e->mem);
	if (!s->cand || !s->ops || !ix_ok) {
		if (ix_ok)
			cg_index_fini(&s->ix);
		if (sc_ok)
			cg_scratch_fini(&s->sc, e->mem);
		e->mem(s->cand, 0);
		e->mem(s->ops, 0);
		e->mem(s, 0);
		return NULL;
	}
	pthread_mutex_lock(&e->lock);
	s->next = e->streams;
	if (e->streams)
		e->streams->prev = s;
	e->streams = s;
	pthread_mutex_unlock(&e->lock);
	return s;
}

static void add_stats(struct cg_stats *into, const struct cg_stats *from)
{
	_Static_assert(sizeof(struct cg_stats) % sizeof(uint64_t) == 0, "cg_stats: only uint64_t");
	uint64_t *d = (uint64_t *)into;
	const uint64_t *f = (const uint64_t *)from;
	for (size_t i = 0; i < sizeof(*into) / sizeof(uint64_t); i++)
		d[i] += __atomic_load_n(&f[i], __ATOMIC_RELAXED);
}

/* With the driver gone nothing can be submitted or destroyed any more: only memory is freed. */
static void stream_release(struct cg_stream *s, enum cg_reason why, bool driver_gone)
{
	struct cg_engine *e = s->e;
	if (!driver_gone) {
		if (s->deferring)
			end_deferral(s, why);
		if (s->hold)
			release_hold(s, false);
		cut(s, false, false);
	}
	for (uint32_t i = 0; i <= s->ix.key_mask; i++)
		if (s->ix.by_key[i])
			destroy_instances(s, s->ix.by_key[i], driver_gone);
	pthread_mutex_lock(&e->lock);
	if (s->prev)
		s->prev->next = s->next;
	else
		e->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->st.loop_iterations = s->per.iterations;
	add_stats(&e->retired, &s->st);
	pthread_mutex_unlock(&e->lock);
	cg_index_fini(&s->ix);
	cg_scratch_fini(&s->sc, e->mem);
	cg_loop_fini(&s->per, e->mem);
	cg_places_fini(&s->places, e->mem);
	e->mem(s->cand, 0);
	e->mem(s->ops, 0);
	e->mem(s, 0);
}

void cg_stream_free(struct cg_stream *s, enum cg_reason why)
{
	if (s)
		stream_release(s, why == CG_R_NONE ? CG_R_EXIT : why, false);
}

void cg_engine_free(struct cg_engine *e, bool driver_gone)
{
	if (!e)
		return;
	while (e->streams)
		stream_release(e->streams, CG_R_EXIT, driver_gone);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->ctl_lock);
	e->mem(e, 0);
}

void cg_engine_stats(const struct cg_engine *e, struct cg_stats *out)
{
	struct cg_engine *me = (struct cg_engine *)e;  /* the lock is not part of the value */
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&me->lock);
	add_stats(out, &e->retired);
	for (const struct cg_stream *s = e->streams; s; s = s->next) {
		add_stats(out, &s->st);
		out->loop_iterations += __atomic_load_n(&s->per.iterations, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&me->lock);
	out->graphs_alive = __atomic_load_n(&e->graphs_alive, __ATOMIC_RELAXED);
}

uint32_t cg_engine_divergence_sites(const struct cg_engine *e, struct cg_divergence_site *out,
                                    uint32_t max)
{
	struct cg_engine *me = (struct cg_engine *)e;  /* the lock is not part of the value */
	uint32_t n = 0;
	pthread_mutex_lock(&me->lock);
	for (uint32_t i = 0; i < CG_SITES; i++) {
		const struct cg_divergence_site *t = &e->sites[i];
		if (!t->count || (n == max && (!max || out[max - 1].count >= t->count)))
			continue;
		/* insertion into out[0..n), most frequent first */
		uint32_t k = n < max ? n++ : max - 1;
		for (; k > 0 && out[k - 1].count < t->count; k--)
			out[k] = out[k - 1];
		out[k] = *t;
	}
	pthread_mutex_unlock(&me->lock);
	return n;
}

void cg_engine_control(const struct cg_engine *e, struct cg_control_summary *out)
{
	struct cg_engine *me = (struct cg_engine *)e;  /* the lock is not part of the value */
	pthread_mutex_lock(&me->ctl_lock);
	cg_control_summarize(&e->ctl, out);
	pthread_mutex_unlock(&me->ctl_lock);
}
