/* Replay and the deferral budget (replay.h). */
#include <pthread.h>
#include <string.h>
#include "policy/replay.h"
#include "policy/samples.h"

#define CG_INSTANCES 32       /* graphs per chunk, one per recurrence between two boundaries */
#define CG_PLACE_SETTLED 3    /* runs by which a place's chunk leads another before it is trusted */
#define CG_INSTANCE_OPS 1024  /* and more of a short chunk, up to this many nodes in all */
/* Graph launches by which a chunk's graph has about repaid its build, counted for the report
 * (chunks_launched_8_times): a growing-context decode on the H100 took 0.27-0.35 ms of host
 * time a graph built and saved 3.1-3.5 us an op replayed, ~11 ops a launch (bench/results,
 * b8aaac8). A chunk learned that stops short of it (a kernel choice met at a few lengths only)
 * cost the program more than it gave back. */
#define CG_REPAID_LAUNCHES 8

/* ---- replay ----------------------------------------------------------------------------- */

/* A graph for one more position of `t`, built with the deferred ops' own arguments. A failure
 * only means this position shares an instance (and patches more). Its executable is its own:
 * a position's instance exists to hold that position's arguments from step to step. */
static bool add_instance(struct cg_stream *s, struct cg_chunk *t)
{
	struct cg_engine *e = s->e;
	if (!cg_reserve_graph(s, t))
		return false;
	size_t args = t->args_off[t->n];
	void **xg = e->mem(t->xgraph, t->ninst * sizeof(*xg));
	if (xg)
		t->xgraph = xg;
	unsigned char *xa = xg ? e->mem(t->xargs, t->ninst * args) : NULL;
	if (xa)
		t->xargs = xa;
	void *graph = NULL;
	const char *detail = xa ? NULL : "out of host memory";
	for (uint32_t i = 0; xa && i < t->n; i++)
		cg_scratch_op(&s->sc, i, &s->ops[i]);
	if (!xa || e->be->build(e->be_ctx, s->be_stream, s->ops, t->n, false, &graph,
	                             &detail) != 0) {
		__atomic_fetch_sub(&e->graphs_alive, 1, __ATOMIC_RELAXED);
		cg_emit_build_failed(s, t, detail);
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
	CG_ASSERT(t->ninst >= 1);
	if (k < t->ninst)
		return k;
	if (k == t->ninst && add_instance(s, t))
		return k;
	return k % t->ninst;
}

/* ---- the deferral budget ------------------------------------------------------------------ */

#define BUDGET_WINDOW 64   /* completed deferrals over which the budget may come down */

/* A chunk timed out: the stream's budget doubles (the flusher reads it for the next one). */
void cg_budget_timeout(struct cg_stream *s)
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

/* The deferral is over, `t` about to run: how long it took (the budget, the chunk's span). */
static void deferral_done(struct cg_stream *s, struct cg_chunk *t)
{
	budget_completed(s);
	uint64_t since = __atomic_load_n(&s->pending_since, __ATOMIC_RELAXED);
	if (since && t->span_n < CG_SPAN_RUNS) {
		uint64_t now = s->e->now_ns();
		t->span_us += now > since ? (double)(now - since) / 1e3 : 0;
		t->span_n++;
	}
}

/* Patch into instance `graph` (its arguments `inst_args`) the deferred ops' arguments that
 * differ from what it holds, or every op's where its executable holds another graph's (the
 * backend's claim). Returns NONE, PATCH_FAILED or LAUNCH_FAILED (the claim failed);
 * `*patched`: nodes patched. */
static enum cg_reason patch_changed(struct cg_stream *s, struct cg_chunk *t, void *graph,
                                    unsigned char *inst_args, uint32_t *patched,
                                    const char **detail)
{
	const struct cg_engine *e = s->e;
	const struct cg_scratch *sc = &s->sc;
	int claim = e->be->claim ? e->be->claim(e->be_ctx, graph, detail) : 0;
	if (claim < 0)
		return CG_R_LAUNCH_FAILED;
	for (uint32_t i = 0; i < t->n; i++) {
		unsigned char *held = inst_args + t->args_off[i];
		const unsigned char *now = sc->bytes + sc->args_off[i];
		if (!claim && memcmp(held, now, sc->args_len[i]) == 0)
			continue;
		struct cg_op op;
		cg_scratch_op(sc, i, &op);
		if (e->be->patch(e->be_ctx, graph, i, &op, detail) != 0)
			return CG_R_PATCH_FAILED;
		memcpy(held, now, sc->args_len[i]);
		++*patched;
	}
	return CG_R_NONE;
}

/* The graph ran: counted, and the stream learns on from here. */
static void launched(struct cg_stream *s, struct cg_chunk *t)
{
	ST(s, ops_replayed, t->n);
	ST(s, graph_launches, 1);
	if (!__atomic_load_n(&s->e->launched, __ATOMIC_RELAXED))
		__atomic_store_n(&s->e->launched, true, __ATOMIC_RELAXED);
	t->launched++;
	ST(s, chunks_repaid, t->launched == CG_REPAID_LAUNCHES);
	t->last_used = ++s->tick;
	cg_set_mode(s, CG_MODE_LEARNING);
}

/* The deferred ops are exactly `t`: patch the arguments that differ from what its graph holds,
 * launch it. On failure nothing ran, so the ops go eagerly, in order. */
void cg_launch_chunk(struct cg_stream *s, struct cg_chunk *t)
{
	CG_ASSERT(s->mode != CG_MODE_LEARNING);
	CG_ASSERT(t->state == CG_CHUNK_ARMED && t->graph && t->n == s->sc.n);
	deferral_done(s, t);
	s->just_launched = t->key;
	const struct cg_engine *e = s->e;
	const char *detail = NULL;
	uint32_t patched = 0;
	uint32_t k = pick_instance(s, t);
	void *graph = k ? t->xgraph[k - 1] : t->graph;
	enum timing timing = cg_timing_wanted(s, t);
	if (timing == TIME_EAGER && cg_eager_sample(s, t))
		return;
	enum cg_reason r = patch_changed(s, t, graph, cg_chunk_inst_args(t, k), &patched, &detail);
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
		cg_submit_deferred(s, r, (struct cg_event){ .op_index = s->chunk_first,
		                                            .chunk_ops = t->n, .chunk_key = t->key,
		                                            .detail = detail });
		cg_chunk_failed(s, t, r);
	} else {
		launched(s, t);
	}
	CG_ASSERT(s->mode == CG_MODE_LEARNING);
	cg_chunk_ended(s, t);
	cg_chunk_reset(s);
}

/* The deferred ops grew by one: launch a chunk they complete unless a longer one may still
 * follow, and not wait for a longer one where the complete one is what ran at this place before (a
 * longer one that then stopped matching would cost the deferred ops a divergence). */
static void after_match(struct cg_stream *s)
{
	struct cg_defer *d = &s->defer;
	CG_ASSERT(s->mode == CG_MODE_DEFERRING && d->ncand > 0);
	d->complete = NULL;
	for (uint32_t i = 0; i < d->ncand; i++)
		if (d->cand[i]->n == s->sc.n)
			d->complete = d->cand[i];
	if (d->complete && (d->ncand == 1 || d->complete == d->expect)) {
		if (d->ncand > 1)
			ST(s, place_launches, 1);
		cg_launch_chunk(s, d->complete);
	}
}

static bool grow_cand(struct cg_stream *s)
{
	struct cg_defer *d = &s->defer;
	uint32_t cap = d->cap * 2;
	struct cg_chunk **p = s->e->mem(d->cand, cap * sizeof(*p));
	if (!p)
		return false;
	d->cand = p;
	d->cap = cap;
	return true;
}

/* At a chunk start: defer the op if it starts one or more armed chunks, unless the chunk that
 * ran at this place lately starts with it too and has no graph (disabled, learning, evicted):
 * an armed chunk that starts alike elsewhere (another layer, the backward pass) would only
 * make the deferred ops diverge where that one continues. The one that ran here is the
 * candidate preferred. `here`, `margin`: that chunk's key and lead (cg_places_predict; 0: none). */
bool cg_start_deferral(struct cg_stream *s, const struct cg_op *op, uint64_t hash,
                       uint64_t here, uint32_t margin)
{
	struct cg_defer *d = &s->defer;
	uint32_t need = 0;
	CG_ASSERT(s->mode == CG_MODE_LEARNING && !s->sc.n);
	d->ncand = 0;
	d->expect = NULL;
	for (struct cg_chunk *t = cg_index_armed(&s->ix, hash); t; t = t->armed_next) {
		ST(s, candidates, 1);
		if (!cg_chunk_op_matches(t, 0, op, hash))
			continue;
		if (d->ncand == d->cap && !grow_cand(s))
			break;  /* fewer candidates only means more eager work */
		d->cand[d->ncand++] = t;
		if (t->key == here)
			d->expect = t;
		if (cg_chunk_bytes(t) > need)
			need = cg_chunk_bytes(t);
	}
	if (!d->ncand)
		return false;
	/* The chunk of this place has no graph: a candidate that it begins with completes here
	 * (prefer the longest such). None does: they can only diverge, so once this place is
	 * settled (a chunk learned from wherever a flush or a divergence left the deferred ops,
	 * different every time, is no reason to stay eager), its ops run eagerly as that chunk. */
	if (here && !d->expect) {
		const struct cg_chunk *t = cg_index_find_key(&s->ix, here);
		if (t && t->state != CG_CHUNK_ARMED && cg_chunk_op_matches(t, 0, op, hash)) {
			for (uint32_t i = 0; i < d->ncand; i++)
				if (cg_chunk_begins(t, d->cand[i]) &&
				    (!d->expect || d->cand[i]->n > d->expect->n))
					d->expect = d->cand[i];
			/* Settled too: a place where a chunk still learning came at each sighting so far,
			 * unrivalled. Deferred, its next sighting (the one that arms it, at the default
			 * warmup) would only diverge, or be cut by the boundary that ends it while still a
			 * prefix, and lose the graph it earns where its learning holds it. */
			bool settled = margin >= CG_PLACE_SETTLED ||
			               (t->state == CG_CHUNK_LEARNING && margin >= t->seen);
			if (!d->expect && settled) {
				ST(s, place_eager, 1);
				d->ncand = 0;
				s->eager_place = t;
				return false;
			}
		}
	}
	/* Room for the longest candidate now, so that deferred ops are never lost to memory. */
	if (!cg_scratch_reserve(&s->sc, need, s->e->mem)) {
		/* Reported here; the chunk's ops are counted when it is cut. */
		d->ncand = 0;
		s->why = CG_R_NO_MEMORY;
		cg_fallback(s, CG_R_NO_MEMORY, 0, true, (struct cg_event){ .op_index = s->op_index - 1 });
		return false;
	}
	cg_push_op(s, op, hash);
	cg_set_mode(s, CG_MODE_DEFERRING);
	after_match(s);
	return true;
}

/* While deferring: keep the candidates whose next op is this one. False when none is left. */
bool cg_follow_deferred(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	struct cg_defer *d = &s->defer;
	uint32_t pos = s->sc.n, kept = 0;
	CG_ASSERT(s->mode == CG_MODE_DEFERRING);
	bool expect_kept = false;  /* `expect` is always one of the candidates: matched once */
	ST(s, candidates, d->ncand);
	for (uint32_t i = 0; i < d->ncand; i++) {
		struct cg_chunk *t = d->cand[i];
		if (t->n > pos && cg_chunk_op_matches(t, pos, op, hash)) {
			d->cand[kept++] = t;
			expect_kept |= t == d->expect;
		}
	}
	if (!kept)
		return false;  /* nothing was overwritten: cand[] still names the old candidates */
	if (!expect_kept)
		d->expect = NULL;
	d->ncand = kept;
	cg_push_op(s, op, hash);
	after_match(s);
	return true;
}

/* At a boundary: the candidate whose ops the boundary cuts short after the deferred ones (`at`
 * of them): the first longer than that, or the one that ran at this place before. */
struct cg_chunk *cg_defer_cut_short(const struct cg_stream *s, uint32_t at)
{
	const struct cg_defer *d = &s->defer;
	struct cg_chunk *rest = NULL;
	CG_ASSERT(s->mode == CG_MODE_DEFERRING);
	for (uint32_t i = 0; i < d->ncand; i++)
		if (d->cand[i]->n > at && (!rest || d->cand[i] == d->expect))
			rest = d->cand[i];
	return rest;
}

/* The deferred ops waited the whole deferral budget for their chunk to complete. Once in a
 * while that is the host being preempted; when a chunk keeps timing out, the program submits
 * it more slowly than the budget allows (a Python training loop). Such chunks stop deferring,
 * and the part that did arrive becomes a chunk of its own, built and launched now, so that its
 * next occurrence completes within the budget. Whether a stream whose deferrals keep timing
 * out should defer at all is the controller's call: it measures what the timeouts cost the
 * program (control.h). */
#define TIMEOUTS_BEFORE_SPLIT 3

bool cg_defer_timed_out(struct cg_stream *s)
{
	struct cg_defer *d = &s->defer;
	uint32_t p = s->sc.n;
	bool all_slow = true;
	CG_ASSERT(s->mode == CG_MODE_DEFERRING && !d->complete);
	s->timeouts++;
	for (uint32_t i = 0; i < d->ncand; i++) {
		struct cg_chunk *t = d->cand[i];
		t->timeouts++;
		all_slow &= t->timeouts >= TIMEOUTS_BEFORE_SPLIT && t->timeouts * 4 > t->launched;
	}
	if (!all_slow)
		return false;
	while (d->ncand)
		cg_disable(s, d->cand[0], CG_R_TIMEOUT);  /* drops it from the candidates */
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
	if (cg_build_graph(s, pre, &detail) != CG_R_NONE)
		return false;
	cg_launch_chunk(s, pre);
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
                      uint32_t at, uint32_t ops, uint64_t op_index)
{
	struct cg_divergence_site site = { .count = 1, .at = at, .ops = ops, .first_op = op_index,
	                                   .last_op = op_index };
	site_name(site.expected, expected);
	site_name(site.got, got);
	pthread_mutex_lock(&e->lock);
	struct cg_divergence_site *least = &e->sites[0];
	for (uint32_t i = 0; i < CG_SITES; i++) {
		struct cg_divergence_site *t = &e->sites[i];
		if (t->count && t->at == at && t->ops == ops && strcmp(t->expected, site.expected) == 0 &&
		    strcmp(t->got, site.got) == 0) {
			t->count++;
			if (op_index < t->first_op)  /* (another stream's ops) */
				t->first_op = op_index;
			if (op_index > t->last_op)
				t->last_op = op_index;
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
void cg_diverge(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	const struct cg_defer *d = &s->defer;
	uint32_t pos = s->sc.n, ops = 0;
	struct cg_op expected = { 0 };
	CG_ASSERT(s->mode == CG_MODE_DEFERRING && !d->complete);
	for (uint32_t i = 0; i < d->ncand; i++) {
		const struct cg_chunk *t = d->cand[i];
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
	note_site(s->e, expected.sig ? &expected : NULL, &got, pos, ops, s->op_index - 1);
	cg_submit_deferred(s, CG_R_DIVERGENCE, (struct cg_event){ .op_index = s->op_index - 1,
	                   .chunk_ops = pos, .expected = expected.sig ? &expected : NULL,
	                   .got = &got });
	CG_ASSERT(s->mode == CG_MODE_LEARNING);
	s->why = CG_R_DIVERGENCE;
	/* The deferred ops end where the loop is cut (loop.c): they are a chunk of their own, as
	 * they are where they were learned, so that the cuts after them stay in step; and where the
	 * stream cuts anew (samples.c: the ops before a variant that runs eagerly for good). Else
	 * the chunk goes on, and should it turn out to be such a variant, that cut is made from then
	 * on (cg_cut_variant, at its end). */
	if (cg_loop_cut_before(&s->per) || cg_split_here(s))
		cg_cut(s, true, false);
	else
		s->diverged_at = pos;
}
