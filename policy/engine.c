/* The per-stream state machine. Learning: the op sequence is cut into chunks by content (so the
 * chunks of a loop align by themselves, whatever its period or prologue); a chunk seen `warmup`
 * times gets a graph. Replay: ops that match an armed chunk are deferred until it is complete,
 * then its graph is launched with the changed arguments patched in. Anything else runs eagerly,
 * in order, and is counted by reason.
 *
 * A stream is in one of four modes (enum cg_mode, stream.h), changed by one function only
 * (cg_set_mode, stream.c, under every file here: the modes' own files end their modes, a
 * launch returning the stream to learning):
 *
 *   LEARNING ──start_chunk──▶ DEFERRING        replay.c: the candidates followed, the complete
 *      │                                       one launched; a divergence or a boundary ends it
 *      ├─────start_chunk──▶ DEFERRING_REST     pieces.c: the rest of a chunk a boundary cut
 *      └─────start_chunk──▶ HOLDING            samples.c: a learning chunk's sighting held back
 *                                              to run as its graph or as a timed sample
 *   Each returns to LEARNING once its ops ran, as a graph or eagerly.
 *
 * cg_submit, cg_boundary and cg_flush switch on the mode. Here: learning (where the chunk
 * being learned is cut), the op's way in, boundaries and flushes, the controller's hooks,
 * streams' lifetimes. The primitives the mode modules build on are in stream.h and stream.c. */
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

/* ---- learning: where the chunk being learned is cut ------------------------------------- */

/* What ends the learning chunk after its latest op, the first of them that applies. */
enum cut {
	CUT_NONE,
	CUT_UNIT,     /* a short loop's unit is whole (loop.h) */
	CUT_PLACE,    /* the chunk that ran at this place ends here */
	CUT_SPLIT,    /* cut anew (samples.c): an exposed chunk's first half, the ops before a
	                 variant that runs eagerly for good */
	CUT_CONTENT,  /* a content-defined cut: the op's hash */
	CUT_LENGTH,   /* the chunk is at its longest */
};

/* A unit of a short loop ends here, after ops that are no part of it (the stretch before the
 * loop was found, extra work): they ran eagerly and are forgotten, so that the unit is learned
 * as the chunk it will be (ops held for a sample run first: the hold was for another chunk).
 * The flushed ops come first in the scratch, then the passed ones. */
static void drop_front(struct cg_stream *s, uint32_t k)
{
	CG_ASSERT(k > 0 && k <= s->sc.n);
	if (s->mode == CG_MODE_HOLDING)
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

/* The learning chunk is shorter than the unit whose cut is due: when the chunk content cut
 * right before it holds the unit's front, it is put back in front of it. */
static void unit_front(struct cg_stream *s)
{
	const struct cg_chunk *t = s->cut_before;
	uint32_t k = s->per.unit - s->sc.n;
	if (!t || s->mode == CG_MODE_HOLDING || t->n < k || s->cut_before_end != s->chunk_first ||
	    !cg_scratch_prepend(&s->sc, t, k, s->e->mem))
		return;
	s->chunk_first -= k;
	CG_ASSERT(s->sc.n == s->per.unit);
}

/* A short loop's chunks are its units: the learning chunk is brought in step with the unit
 * whose cut is due, as the loop says (cg_loop_align). True where that unit is cut here. */
static bool align_to_unit(struct cg_stream *s)
{
	struct cg_loop_fit f = cg_loop_align(&s->per, s->sc.n, s->chunk_first, s->len_max,
	                                     s->e->cfg.chunk_max);
	if (f.drop)
		drop_front(s, f.drop);
	else if (f.front)
		unit_front(s);
	return s->per.cut && !(s->per.unit && s->sc.n < s->per.unit);
}

static enum cut pick_cut(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	const struct cg_engine *e = s->e;
	/* Where an eager run at a place ends, asked before a short loop's unit drops what came
	 * before it. A loop no longer than a chunk is cut at its units only: a content-defined cut
	 * would make its chunks longer or shorter than a unit, or out of step with it. */
	bool place = cg_place_chunk_ends(s, op, hash);
	bool content = !s->per.unit && s->sc.n >= e->chunk_min && (hash >> 32) < e->cdc_below;
	if (align_to_unit(s))
		return CUT_UNIT;
	if (place)
		return CUT_PLACE;
	if (cg_split_here(s))
		return CUT_SPLIT;
	if (content)
		return CUT_CONTENT;
	return s->sc.n >= s->len_max ? CUT_LENGTH : CUT_NONE;
}

/* The held ops reach a cut, or outgrow the chunk held for: complete, they run as that chunk
 * (its graph, or a sample), this op too; else they run eagerly, all but this op. */
static enum cg_verdict settle_hold(struct cg_stream *s, bool ends)
{
	if (ends && s->sc.n == s->hold->n) {
		cg_hold_complete(s);
		return CG_TAKEN;
	}
	cg_release_hold(s, true);
	return CG_PASS;
}

/* The learning chunk ends, as the latest sightings of it: learned (cg_cut), and where deferred
 * ops diverged into it, a variant that runs eagerly for good, the ops before it are cut off
 * from then on (cg_cut_variant). */
static struct cg_chunk *cut_learned(struct cg_stream *s)
{
	uint32_t diverged_at = s->diverged_at;
	struct cg_chunk *t = cg_cut(s, true, true);
	if (t && diverged_at)
		cg_cut_variant(s, t, diverged_at);
	return t;
}

/* The learning chunk of `n` ops ends (`cut`): a chunk content cut holds this occurrence's
 * arguments (cg_learned), where a short loop's first unit can begin. */
static void end_chunk(struct cg_stream *s, enum cut cut, uint32_t n)
{
	uint64_t first = s->chunk_first;
	s->length_cut = cut == CUT_LENGTH;
	struct cg_chunk *t = cut_learned(s);
	if (cut == CUT_CONTENT && t && t->state == CG_CHUNK_LEARNING && t->n == n) {
		s->cut_before = t;
		s->cut_before_end = first + n;
	}
}

/* The op runs eagerly (the caller submits it, unless it is held) and is learned. */
static enum cg_verdict learn(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	CG_ASSERT(s->mode == CG_MODE_LEARNING || s->mode == CG_MODE_HOLDING);
	bool held = s->mode == CG_MODE_HOLDING && cg_hold_takes(s, op, hash);
	cg_push_op(s, op, hash);
	if (!held) {
		s->passed++;
		ST(s, ops_eager, 1);
	}
	CG_ASSERT(s->passed <= s->sc.n);
	enum cut cut = pick_cut(s, op, hash);
	uint32_t n = s->sc.n;
	enum cg_verdict v = CG_PASS;
	if (s->mode == CG_MODE_HOLDING) {
		/* (a chunk cut by a boundary is complete when the boundary comes) */
		if (!cut && n <= s->hold->n)
			return CG_TAKEN;
		v = settle_hold(s, cut != CUT_NONE);
	}
	if (cut)
		end_chunk(s, cut, n);
	return v;
}

/* ---- the deferral controller ------------------------------------------------------------ */

/* One op of the program: counted; the first op after waits for the GPU, or the last of a
 * window without one, ends an interval of the program's time for the controller. Whatever
 * stream's op closes it reports what a finished probe decided. */
#define CG_CTL_BATCH 32  /* a stream's ops between two looks at every stream's count */

/* Ops submitted over every stream so far (freed streams included); `work`: of them, those
 * replayed and those deferral wasted. */
static uint64_t ops_total(struct cg_engine *e, struct cg_control_work *work)
{
	pthread_mutex_lock(&e->lock);
	uint64_t n = e->retired.ops;
	*work = (struct cg_control_work){ e->retired.ops_replayed, e->retired.ops_wasted };
	for (const struct cg_stream *s = e->streams; s; s = s->next) {
		n += __atomic_load_n(&s->st.ops, __ATOMIC_RELAXED);
		work->replayed += __atomic_load_n(&s->st.ops_replayed, __ATOMIC_RELAXED);
		work->wasted += __atomic_load_n(&s->st.ops_wasted, __ATOMIC_RELAXED);
	}
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
	struct cg_control_work work;
	uint64_t total = ops_total(e, &work);
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
		                              graphs, &work, &d);
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

/* A chunk starts with `op` (no op is pending): deferred where it starts an armed chunk worth
 * deferring for, or the rest of the chunk the latest boundary cut short (`cut_short`); else it
 * may be held for a learning sample or for the graph this sighting earns. True: taken. */
static bool start_chunk(struct cg_stream *s, const struct cg_op *op, uint64_t hash,
                        struct cg_rest cut_short)
{
	if (!control_defers(s->e)) {
		control_eager(s, op, hash);
		return false;
	}
	/* the chunk that ran at this place lately, which both ask after */
	uint32_t margin = 0;
	uint64_t here = s->place ? cg_places_predict(&s->places, s->place, &margin) : 0;
	if (cg_start_deferral(s, op, hash, here, margin) ||
	    cg_start_rest(s, cut_short.chunk, cut_short.at, op, hash))
		return true;
	cg_start_hold(s, op, hash, here);
	return false;
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
	CG_ASSERT((s->mode == CG_MODE_LEARNING) == !cg_stream_pending(s));
	switch (s->mode) {
	case CG_MODE_DEFERRING_REST:
		if (cg_follow_rest(s, op, hash))
			return CG_TAKEN;
		cg_rest_eager(s);
		return learn(s, op, hash);
	case CG_MODE_DEFERRING:
		if (cg_follow_deferred(s, op, hash))
			return CG_TAKEN;
		if (!s->defer.complete) {
			cg_diverge(s, op, hash);
			return learn(s, op, hash);
		}
		cg_launch_chunk(s, s->defer.complete);  /* then `op` starts a chunk */
		s->just_launched = 0;
		break;
	case CG_MODE_LEARNING:
	case CG_MODE_HOLDING:
		break;
	}
	/* What a boundary cut short is for the op right after it. */
	struct cg_rest cut_short = s->cut_short;
	s->cut_short.chunk = NULL;
	if (!s->sc.n && !s->e->cfg.record_only && start_chunk(s, op, hash, cut_short))
		return CG_TAKEN;
	return learn(s, op, hash);
}

/* Deferred work must go now: as the graph of `t` where it is exactly that armed chunk, else
 * eagerly (and it then continues as a learning chunk). */
static void end_deferral(struct cg_stream *s, struct cg_chunk *t, enum cg_reason why)
{
	CG_ASSERT(s->mode == CG_MODE_DEFERRING || s->mode == CG_MODE_DEFERRING_REST);
	if (t) {
		cg_launch_chunk(s, t);
		return;
	}
	cg_submit_deferred(s, why, (struct cg_event){ .op_index = s->chunk_first, .chunk_ops = s->sc.n });
	s->why = why;
}

/* The candidate the deferred ops are exactly (NULL: none, or not deferring for candidates). */
static struct cg_chunk *complete_of(const struct cg_stream *s)
{
	return s->mode == CG_MODE_DEFERRING ? s->defer.complete : NULL;
}

/* At a boundary: the armed chunk whose ops the boundary cuts short, and how many of them came
 * before it (the ops after it may be its rest). Deferring a rest already, or no op since the
 * boundary that cut it, the rest goes on. */
static struct cg_rest cut_short_here(const struct cg_stream *s)
{
	CG_ASSERT(s->mode == CG_MODE_LEARNING || !s->cut_short.chunk);
	struct cg_rest r = s->mode == CG_MODE_DEFERRING_REST ? s->rest : s->cut_short;
	r.at = (r.chunk ? r.at : 0) + s->sc.n;
	if (s->mode == CG_MODE_DEFERRING)
		r.chunk = cg_defer_cut_short(s, r.at);
	return r;
}

void cg_boundary(struct cg_stream *s, enum cg_reason why)
{
	ST(s, boundaries, 1);
	if (!s->at_boundary)
		cg_loop_boundary(&s->per);
	/* The held chunk ends here, as it did when it was seen (replayed, it ran before the
	 * boundary: its instance is counted in the epoch it ran in). */
	if (s->mode == CG_MODE_HOLDING && s->sc.n == s->hold->n)
		cg_hold_complete(s);
	else if (s->mode == CG_MODE_HOLDING)
		cg_release_hold(s, false);
	s->epoch++;
	struct cg_rest cut = cut_short_here(s);
	if (s->mode != CG_MODE_LEARNING) {
		struct cg_chunk *t = complete_of(s);
		end_deferral(s, t ? t : cg_arm_piece(s), why);
	}
	CG_ASSERT(s->mode == CG_MODE_LEARNING);
	cut_learned(s);
	if (s->e->cfg.measure && cg_reason_waits(why))
		control_wait(s->e);
	/* The host now waits for the chunk that just ran (see cg_stream_timing: EXPOSED). */
	if (cg_reason_waits(why) && s->just_launched) {
		struct cg_chunk *t = cg_index_find_key(&s->ix, s->just_launched);
		if (t)
			t->waits++;
		s->just_launched = 0;  /* marked (a later wait would mark it again, to no effect) */
	}
	s->at_boundary = true;
	s->cut_short = (struct cg_rest){ cut.chunk && cut.at < cut.chunk->n ? cut.chunk : NULL,
	                                 cut.at };
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
	if (ran && !s->sc.n && s->mode == CG_MODE_LEARNING && s->e->cfg.chunk_max >= 2) {
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
	if (!s->at_boundary || s->mode != CG_MODE_LEARNING)
		return CG_BUSY;
	return s->just_launched ? CG_QUIET : CG_SETTLED;
}

void cg_engine_note_wait(struct cg_engine *e)
{
	if (e->cfg.measure)
		control_wait(e);
}

bool cg_flush(struct cg_stream *s, enum cg_reason why)
{
	switch (s->mode) {
	case CG_MODE_LEARNING:
		return false;
	case CG_MODE_HOLDING:
		/* Held for a sample: the ops run as they are, and learning goes on (no deferral of the
		 * program's timed out: the budget and the chunks' timeouts stay as they are). */
		cg_release_hold(s, false);
		return true;
	case CG_MODE_DEFERRING:
	case CG_MODE_DEFERRING_REST:
		break;
	}
	struct cg_chunk *t = complete_of(s);
	if (why == CG_R_TIMEOUT)
		cg_budget_timeout(s);
	if (why == CG_R_TIMEOUT && s->mode == CG_MODE_DEFERRING && !t && !s->e->cfg.record_only &&
	    cg_defer_timed_out(s))
		return true;
	/* The chunk these ops end up in is cut where the host was slow, or another thread made a
	 * boundary: it is no lesson for this place. */
	s->place_unsure = !t;
	end_deferral(s, t, why);
	return true;
}

bool cg_stream_pending(const struct cg_stream *s)
{
	return __atomic_load_n(&s->pending_since, __ATOMIC_RELAXED) != 0;
}

bool cg_stream_held(const struct cg_stream *s)
{
	return s->mode == CG_MODE_HOLDING;
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
	/* no candidate left (or a rest deferred): the deferred ops go eagerly */
	if ((s->mode == CG_MODE_DEFERRING && !s->defer.ncand && !s->defer.complete) ||
	    s->mode == CG_MODE_DEFERRING_REST)
		end_deferral(s, NULL, r);
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
	s->defer.cap = 8;
	s->mode = CG_MODE_LEARNING;
	s->at_boundary = true;
	s->budget_ns = e->cfg.defer_budget_ns;
	s->len_max = e->cfg.chunk_max;
	s->place = cg_place_after(0, 0);  /* the stream's first chunk */
	/* a loop longer than a chunk: anchor cuts at least half the longest chunk apart */
	cg_loop_init(&s->per, e->cfg.chunk_max / 2, e->cfg.chunk_max, e->cfg.warmup);
	s->defer.cand = e->mem(NULL, s->defer.cap * sizeof(*s->defer.cand));
	s->ops = e->mem(NULL, e->cfg.chunk_max * sizeof(*s->ops));
	bool sc_ok = cg_scratch_init(&s->sc, e->cfg.chunk_max, e->mem);
	bool ix_ok = sc_ok && cg_index_init(&s->ix, e->mem);
	if (!s->defer.cand || !s->ops || !ix_ok) {
		if (ix_ok)
			cg_index_fini(&s->ix);
		if (sc_ok)
			cg_scratch_fini(&s->sc, e->mem);
		e->mem(s->defer.cand, 0);
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
		if (s->mode == CG_MODE_DEFERRING || s->mode == CG_MODE_DEFERRING_REST)
			end_deferral(s, complete_of(s), why);
		if (s->mode == CG_MODE_HOLDING)
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
	e->mem(s->defer.cand, 0);
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
