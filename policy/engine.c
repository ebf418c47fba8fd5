/* The per-stream state machine. Learning: the op sequence is cut into chunks by content (so the
 * chunks of a loop align by themselves, whatever its period or prologue); a chunk seen `warmup`
 * times gets a graph. Replay: ops that match an armed chunk are deferred until it is complete,
 * then its graph is launched with the changed arguments patched in. Anything else runs eagerly,
 * in order, and is counted by reason. Here: learning, the op's way in (cg_submit), boundaries
 * and flushes, the controller's hooks, streams' lifetimes. The pieces of armed chunks that
 * boundaries cut out are in pieces.c; deferring, following and launching an armed chunk in
 * replay.c, the cost gate's samples in samples.c, a stream's state and the primitives all of
 * them build on in stream.h and stream.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "policy/chunk.h"
#include "policy/clock.h"
#include "policy/control.h"
#include "policy/engine.h"
#include "policy/gate.h"
#include "policy/loop.h"
#include "policy/pieces.h"
#include "policy/replay.h"
#include "policy/samples.h"
#include "policy/stream.h"

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

double cg_engine_launch_saved_us(const struct cg_engine_config *cfg, double ops,
                                 double graph_launches)
{
	struct cg_gate_costs c = cg_gate_costs_of(cfg);
	return cg_gate_launch_saved_us(&c, ops, graph_launches);
}

/* A unit of a short loop ends here, after ops that are no part of it (the stretch before the
 * loop was found, extra work): they ran eagerly and are forgotten, so that the unit is learned
 * as the chunk it will be (ops held for a sample run first: the hold was for another chunk).
 * The flushed ops come first in the scratch, then the passed ones. */
static void drop_front(struct cg_stream *s, uint32_t k)
{
	if (s->hold)
		cg_release_hold(s, true);
	uint32_t flushed = s->sc.n - s->passed;
	uint32_t passed = k > flushed ? k - flushed : 0;
	if (passed)
		cg_fallback(s, s->why != CG_R_NONE ? s->why : CG_R_LEARNING, passed, false,
		            (struct cg_event){ 0 });
	s->passed -= passed;
	s->chunk_first += k;
	cg_scratch_drop_front(&s->sc, k);
}

/* The learning chunk, `n` ops, is shorter than the unit whose cut is due: when the chunk content
 * cut right before it holds the unit's front, it is put back in front of it. Returns the ops now
 * in the chunk. */
static uint32_t unit_front(struct cg_stream *s, uint32_t n)
{
	const struct cg_chunk *t = s->cut_before;
	uint32_t k = s->per.unit - n;
	if (!t || s->hold || t->n < k || s->cut_before_end != s->chunk_first ||
	    !cg_scratch_prepend(&s->sc, t, k, s->e->mem))
		return n;
	s->chunk_first -= k;
	return s->sc.n;
}

/* The op runs eagerly (the caller submits it, unless it is held) and is learned. */
static enum cg_verdict learn(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	const struct cg_engine *e = s->e;
	const struct cg_chunk *h = s->hold;
	bool held = h && ((s->sc.n < h->n && cg_chunk_op_matches(h, s->sc.n, op, hash)) ||
	                  cg_hold_switch(s, op, hash));
	if (h && !held)
		cg_release_hold(s, false);
	cg_push_op(s, op, hash);
	if (!held) {
		s->passed++;
		ST(s, ops_eager, 1);
	}
	uint32_t n = s->sc.n;
	/* Where an eager run at a place ends (its chunk's last op), asked before a short loop's
	 * unit drops what came before it. */
	bool place = cg_place_chunk_ends(s, op, hash);
	/* A loop no longer than a chunk is cut at its units only (loop.h): a content-defined cut
	 * would make its chunks longer or shorter than a unit, or out of step with it. */
	bool content = !s->per.unit && n >= e->chunk_min && (hash >> 32) < e->cdc_below;
	if (s->per.cut && s->per.unit && n > s->per.unit)
		drop_front(s, n - s->per.unit);
	/* Before a short loop's first unit ends, what comes before it can go, not the unit. */
	if (n >= e->cfg.chunk_max && s->per.unit && s->per.due_at != UINT64_MAX) {
		uint64_t start = s->per.due_at + 1 - s->per.unit;
		if (start > s->chunk_first && start - s->chunk_first < n)
			drop_front(s, (uint32_t)(start - s->chunk_first));
		n = s->sc.n;
	}
	/* A short loop's chunk at its longest between two of its units' cuts (a unit of more than
	 * half a chunk, whose cut once fell where the chunk was shorter): its oldest ops go, not the
	 * chunk, so that the next cut finds a whole unit. Cut here, the chunks would be of the
	 * chunk's length, out of step with the loop, and learned again every iteration. */
	if (n >= s->len_max && s->per.unit && s->per.anchor && !s->per.cut) {
		drop_front(s, n - (s->len_max - 1));
		n = s->sc.n;
	}
	/* A unit's cut where the chunk is shorter than a unit: a cut made before the loop was
	 * found (by content) fell inside its first unit. The chunk content cut there holds the
	 * unit's front (its ops and arguments, as they ran): the unit is whole again, and its graph
	 * comes now rather than a unit later. Else cut there too, the loop would replay in graphs
	 * of that part's length for good (a loop of one kernel in graphs of 18, not 32); the part
	 * runs on to the next anchor cut, a unit later, and its front is dropped there. */
	if (s->per.cut && s->per.unit && n < s->per.unit)
		n = unit_front(s, n);
	bool unit_cut = s->per.cut && !(s->per.unit && n < s->per.unit);
	bool split = !s->per.unit && cg_split_here(s);
	bool ends = content || unit_cut || place || split || n >= s->len_max;
	enum cg_verdict v = CG_PASS;
	if (s->hold) {
		/* (a chunk cut by a boundary is complete when the boundary comes) */
		if (!ends && n <= s->hold->n)
			return CG_TAKEN;
		if (ends && n == s->hold->n) {
			cg_hold_complete(s);  /* runs this op too */
			v = CG_TAKEN;
		} else {
			cg_release_hold(s, true);
		}
	}
	if (ends) {
		s->length_cut = !content && !unit_cut && !place && !split;
		uint64_t first = s->chunk_first;
		struct cg_chunk *t = cg_cut(s, true, true);
		if (content && !unit_cut && !place && !split && t && t->state == CG_CHUNK_LEARNING &&
		    t->n == n) {
			s->cut_before = t;  /* holds this occurrence's arguments (cg_learned) */
			s->cut_before_end = first + n;
		}
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
		enum cg_control_graphs graphs =
			!__atomic_load_n(&e->launched, __ATOMIC_RELAXED) ? CG_CTL_NO_GRAPHS
			: timed == e->ctl_timed && built == e->ctl_built ? CG_CTL_SETTLED
			                                                 : CG_CTL_UNSETTLED;
		e->ctl_timed = timed;
		e->ctl_built = built;
		decided = cg_control_interval(&e->ctl, wait ? (n ? n - 1 : 0) : n, end, wait != 0,
		                              graphs, &d);
		__atomic_store_n(&e->ctl_probing, e->ctl.phase == CG_CTL_PROBE, __ATOMIC_RELAXED);
		__atomic_store_n(&e->ctl_defer, e->ctl.defer, __ATOMIC_RELAXED);
	}
	since = total > e->ctl_base ? total - e->ctl_base : 0;
	uint64_t room = since < e->ctl.window ? e->ctl.window - since : 1;
	s->ctl_next = s->st.ops + (room < CG_CTL_BATCH ? room : CG_CTL_BATCH);
	pthread_mutex_unlock(&e->ctl_lock);
	if (decided)
		cg_emit(s, (struct cg_event){ .kind = CG_EV_DECISION, .op_index = s->op_index - 1,
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
		if (cg_follow_rest(s, op, hash))
			return CG_TAKEN;
		cg_rest_eager(s);
		return learn(s, op, hash);
	}
	if (s->deferring) {
		if (cg_follow_deferred(s, op, hash))
			return CG_TAKEN;
		if (!s->complete) {
			cg_diverge(s, op, hash);
			return learn(s, op, hash);
		}
		cg_launch_chunk(s, s->complete);  /* then `op` starts a chunk */
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
			if (cg_start_deferral(s, op, hash, here, margin) ||
			    cg_start_rest(s, rest, s->rest_at, op, hash))
				return CG_TAKEN;
			cg_start_hold(s, op, hash, here);
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
		cg_launch_chunk(s, s->complete);
		return;
	}
	cg_submit_deferred(s, why, (struct cg_event){ .op_index = s->chunk_first, .chunk_ops = s->sc.n });
	s->why = why;
}

void cg_boundary(struct cg_stream *s, enum cg_reason why)
{
	ST(s, boundaries, 1);
	if (!s->at_boundary)
		cg_loop_boundary(&s->per);
	/* The held chunk ends here, as it did when it was seen (replayed, it ran before the
	 * boundary: its instance is counted in the epoch it ran in). */
	if (s->hold && s->sc.n == s->hold->n)
		cg_hold_complete(s);
	else if (s->hold)
		cg_release_hold(s, false);
	s->epoch++;
	/* The chunk the deferred ops were cut out of: what follows may be its rest (deferring a
	 * rest already, or no op since the boundary that cut it: the rest goes on). */
	struct cg_chunk *rest = s->rest;
	uint32_t at = (rest ? s->rest_at : 0) + s->sc.n;
	for (uint32_t i = 0; s->deferring && i < s->ncand; i++)  /* (none while deferring a rest) */
		if (s->cand[i]->n > at && (!rest || s->cand[i] == s->expect))
			rest = s->cand[i];
	if (s->deferring && !s->complete)
		cg_arm_piece(s);
	if (s->deferring)
		end_deferral(s, why);
	cg_cut(s, true, true);
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

void cg_passed(struct cg_stream *s, const struct cg_op *op, bool ran)
{
	uint64_t hash = op->hash ? op->hash : cg_sig_hash(op->sig, op->sig_len);
	s->op_index++;
	cg_loop_push(&s->per, hash, s->e->mem);
	/* Run, it starts the chunk being learned, as it will once its shape is proven: else the
	 * first iteration's chunk there is one op short of the next ones' and learned again a step
	 * later. The caller counts it: it is not among the chunk's passed ops. (A launch the driver
	 * refused is no op of any chunk: a graph of it could not be built.) Only where the chunk
	 * has room for the op after it too: that one is pushed before any cut is looked for. */
	if (ran && !s->sc.n && !s->deferring && !s->hold && s->e->cfg.chunk_max >= 2) {
		cg_push_op(s, op, hash);
		s->at_boundary = false;
	}
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
		cg_disable(s, s->cand[0], CG_R_TIMEOUT);  /* drops it from the candidates */
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

bool cg_flush(struct cg_stream *s, enum cg_reason why)
{
	/* Held for a sample: the ops run as they are, and learning goes on (no deferral of the
	 * program's timed out: the budget and the chunks' timeouts stay as they are). */
	if (s->hold) {
		cg_release_hold(s, false);
		return true;
	}
	if (!s->deferring)
		return false;
	if (why == CG_R_TIMEOUT)
		cg_budget_timeout(s);
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
	cg_disable_costed(s, t, r, &cost);
	if (r == CG_R_EXPOSED)
		cg_cut_exposed(s, t);
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
	e->gate = cg_gate_costs_of(&e->cfg);
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
			cg_release_hold(s, false);
		cg_cut(s, false, false);
	}
	for (uint32_t i = 0; i <= s->ix.key_mask; i++)
		if (s->ix.by_key[i])
			cg_destroy_instances(s, s->ix.by_key[i], driver_gone);
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
