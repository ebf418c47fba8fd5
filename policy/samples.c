/* The cost gate's samples (samples.h). */
#include "policy/samples.h"

#define CG_SPLIT_MIN 2  /* ops in an exposed chunk's first part, at least, but for a chunk of two */
#define CG_HOLD_DECLINED 8    /* learning samples declined in a row after which a stream holds
                                 chunks for them again only after CG_HOLD_SKIP it could have */
#define CG_HOLD_SKIP 64

/* The cost gate's samples (gate.h judges them), timed by the backend on the GPU and returned
 * through cg_stream_timing. Eager ones come first from the chunk's sightings while it is learned
 * that run eagerly anyway, after the first (cold: module loads, first launches) and before the
 * one that earns its graph (which runs as that graph, pieces.c), so only with a warmup over 2:
 * their ops are held back (cg_start_hold) and, once the occurrence is complete, submitted in a
 * burst between the backend's events (cg_learn_sample), up to cg_gate_eager_samples() of them.
 * Once its graph has run (its first launch uploads it), the graph's next occurrences are timed,
 * up to CG_TIMING_SAMPLES times; and where learning gave fewer eager samples (the default
 * warmup, the backend declined, a flush or a divergence released the held ops, the loop
 * detector learned the chunk at once), occurrences that could have been replayed run eagerly
 * for them (cg_eager_sample), no more of them than of the graph's, from its second on, only
 * while the graph's times say the gate could act on it (each costs the replay of an
 * occurrence; most graphs take far less GPU time than the launch time they save and need none).
 * Either way the ops are exactly the program's, run once, in order. The backend may decline a
 * sample (busy, or timing failed): a chunk asks only so often. A sample taken is waited for (up
 * to CG_TIMING_WAIT launches, should it never come back) before the next: it may show the next
 * unneeded. */
#define CG_TIMING_ASKS 12
#define CG_TIMING_WAIT 16

struct cg_gate_costs cg_gate_costs_of(const struct cg_engine_config *cfg)
{
	return (struct cg_gate_costs){ cfg->launch_host_us, cfg->graph_launch_host_us,
	                               cfg->warmup };
}

/* The same ops can come to take longer on the GPU while the program runs (a sequence that
 * grows by a token a step: the kernels cover more positions each time, with the same launches),
 * and a wait right after a chunk exposes its whole GPU time: a chunk the host waits for is timed
 * again, afresh, from its CG_RETIME_FIRST-th launch on and each time its launches grew by half
 * since (about ten times over a thousand steps; three graph samples each, no eager run: the
 * eager samples are taken as shifted by what the graph's time changed, gate.c). */
#define CG_RETIME_FIRST 32

static bool sample_out(const struct cg_chunk *t)
{
	return t->timed_eager + t->timed_graph > t->eager_n + t->graph_n &&
	       t->launched < t->timed_at + CG_TIMING_WAIT;
}

static void retime_if_due(struct cg_stream *s, struct cg_chunk *t)
{
	uint64_t due = t->retimed_at ? t->retimed_at + t->retimed_at / 2 : CG_RETIME_FIRST;
	if (!t->waits || !t->graph_n || t->launched < due || sample_out(t))
		return;  /* (a window without a graph sample has nothing to shift eager ones by) */
	t->eager_us = cg_gate_eager_us(t);  /* shifted to the samples of the window ending */
	t->graph_before_us = t->graph_us;
	t->retimed_at = t->launched;
	t->retimes += t->retimes < UINT8_MAX;
	t->graph_us = 0;
	t->graph_n = t->timed_graph = 0;
	t->timing_asks = 0;
	t->timing_done = false;
	ST(s, retimings, 1);
}

enum timing cg_timing_wanted(struct cg_stream *s, struct cg_chunk *t)
{
	if (!s->e->be->time_begin || !t->launched)
		return UNTIMED;
	retime_if_due(s, t);
	if (t->timing_asks >= CG_TIMING_ASKS || t->timing_done)
		return UNTIMED;
	if (sample_out(t))
		return UNTIMED;
	bool eager = !t->retimes && t->timed_eager < cg_gate_eager_samples(&s->e->gate) &&
	             cg_gate_plausible(&s->e->gate, t) &&
	             (t->timed_eager < t->timed_graph || t->timed_graph >= CG_TIMING_SAMPLES);
	if (!eager && t->timed_graph >= CG_TIMING_SAMPLES)
		return UNTIMED;
	t->timing_asks++;
	return eager ? TIME_EAGER : TIME_GRAPH;
}

/* A timed eager run of the deferred ops, which are exactly `t`. False: the backend declined. */
bool cg_eager_sample(struct cg_stream *s, struct cg_chunk *t)
{
	const struct cg_engine *e = s->e;
	CG_ASSERT(s->mode != CG_MODE_LEARNING && t->n == s->sc.n);
	if (!e->be->time_begin(e->be_ctx, s->be_stream, t->key, false))
		return false;
	cg_run_deferred(s);
	e->be->time_end(e->be_ctx, s->be_stream, true);
	__atomic_fetch_add(&s->e->timed, 1, __ATOMIC_RELAXED);
	t->timed_eager++;
	t->timed_at = t->launched;
	t->last_used = ++s->tick;
	cg_fallback(s, CG_R_COST_SAMPLE, t->n, false, (struct cg_event){ 0 });
	cg_chunk_ended(s, t);
	cg_chunk_reset(s);
	return true;
}

/* ---- learning sightings held: for an eager sample, or to run as their graph -------------- */

/* Would an occurrence of learning chunk `t` now be one of its last sightings before its graph,
 * not its first, with an eager sample still to take? */
static bool wants_learning_sample(const struct cg_engine *e, const struct cg_chunk *t)
{
	uint32_t want = cg_gate_eager_samples(&e->gate);
	return t->seen >= 1 && t->timed_eager < want && t->seen + want >= e->cfg.warmup;
}

/* Would an occurrence of learning chunk `t` now earn it its graph (cg_hold_complete)? */
static bool earns_graph(const struct cg_engine *e, const struct cg_chunk *t)
{
	return t->seen + 1 >= e->cfg.warmup && !e->cfg.record_only;
}

/* Is learning chunk `t`'s occurrence now worth holding back: does it earn the graph, or give
 * an eager sample it still wants? */
static bool worth_holding(const struct cg_engine *e, const struct cg_chunk *t)
{
	return t->state == CG_CHUNK_LEARNING &&
	       (earns_graph(e, t) || (e->be->time_begin && wants_learning_sample(e, t)));
}

/* Does learning chunk `t` begin with the held ops? */
static bool begins_with_held(const struct cg_stream *s, const struct cg_chunk *t)
{
	for (uint32_t i = 0; i < s->sc.n; i++) {
		struct cg_op o;
		cg_scratch_op(&s->sc, i, &o);
		if (!cg_chunk_op_matches(t, i, &o, o.hash))
			return false;
	}
	return true;
}

/* The learning chunk worth holding that begins with the held ops (none at a chunk start) and
 * then `op`, the one last seen beginning so first; NULL if none. */
static struct cg_chunk *holdable(const struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	uint32_t k = s->sc.n;
	struct cg_chunk *const *w = s->learn_first[(k ? s->sc.hash[0] : hash) % CG_LEARN_FIRST];
	for (uint32_t i = 0; i < CG_LEARN_WAYS; i++) {
		struct cg_chunk *t = w[i];
		if (t && t != s->hold && t->n > k && worth_holding(s->e, t) &&
		    cg_chunk_op_matches(t, k, op, hash) && begins_with_held(s, t))
			return t;
	}
	return NULL;
}

/* At a chunk start that no armed chunk takes: if the chunk that ran at this place, or else the
 * learning chunk last seen starting with this op, is one that this sighting earns its graph, or
 * one that wants an eager sample, hold its ops back as they come (the program is told they were
 * launched, as with a deferral), so that the occurrence can run as its graph, or as a burst
 * between the backend's events, once complete. Learning goes on as if they had passed: where it
 * cuts elsewhere, or an op differs (and no other learning chunk begins with the held ops and
 * it: hold_switch), or a boundary or the flusher comes first, they run eagerly as they are
 * (cg_release_hold). A stream whose samples the backend keeps declining (a per-thread stream of
 * another thread, timing off) holds for them only now and then, to see whether that changed
 * (samples not read back yet fill the backend's slots for a while): the hold only delays its
 * ops. */
void cg_start_hold(struct cg_stream *s, const struct cg_op *op, uint64_t hash,
                   uint64_t here)
{
	struct cg_engine *e = s->e;
	CG_ASSERT(s->mode == CG_MODE_LEARNING && !s->sc.n);
	if (s->why != CG_R_NONE)
		return;
	struct cg_chunk *t = here ? cg_index_find_key(&s->ix, here) : NULL;
	if (t && cg_chunk_op_matches(t, 0, op, hash)) {
		if (!worth_holding(e, t))
			return;
	} else if (!(t = holdable(s, op, hash))) {
		return;
	}
	if (!earns_graph(e, t) && s->samples.skip) {
		s->samples.skip--;
		return;
	}
	/* Room for the whole chunk now, so that held ops are never lost to memory (the ops that
	 * match it have its sizes). */
	if (!cg_scratch_reserve(&s->sc, cg_chunk_bytes(t), e->mem))
		return;
	s->hold = t;
	cg_set_mode(s, CG_MODE_HOLDING);
}

/* The held ops have left the chunk they were held for at `op`: another learning chunk worth
 * holding that begins with them and `op` takes the hold over, so that chunks of a loop that
 * begin alike (the first op of a step and of its second half, a layer's) each run as the graph
 * their sighting earns, whichever of them was last seen. */
static bool hold_switch(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	struct cg_chunk *t = holdable(s, op, hash);
	if (!t || !cg_scratch_reserve(&s->sc, cg_chunk_bytes(t), s->e->mem))
		return false;
	CG_ASSERT(t->state == CG_CHUNK_LEARNING && t->n > s->sc.n);
	s->hold = t;
	return true;
}

/* The next op, `op`, while ops are held: held too where it continues the chunk held for, or
 * another that begins with the held ops and it (hold_switch); else the held ops run eagerly. */
bool cg_hold_takes(struct cg_stream *s, const struct cg_op *op, uint64_t hash)
{
	const struct cg_chunk *h = s->hold;
	CG_ASSERT(s->mode == CG_MODE_HOLDING && s->sc.n <= h->n);
	if ((s->sc.n < h->n && cg_chunk_op_matches(h, s->sc.n, op, hash)) ||
	    hold_switch(s, op, hash))
		return true;
	cg_release_hold(s, false);
	return false;
}

/* The held ops are exactly the chunk held for, and learning ends its occurrence here: they run
 * in a burst between the backend's events, as a replayed occurrence's eager sample does
 * (cg_eager_sample), and count as learning. (Held to earn the graph that did not come, they run
 * the same way, timed only where the chunk wants a sample.) */
void cg_learn_sample(struct cg_stream *s)
{
	struct cg_engine *e = s->e;
	struct cg_chunk *t = s->hold;
	CG_ASSERT(s->mode == CG_MODE_HOLDING && s->sc.n == t->n);
	if (!e->be->time_begin || !wants_learning_sample(e, t)) {
		cg_release_hold(s, false);
		return;
	}
	bool timed = e->be->time_begin(e->be_ctx, s->be_stream, t->key, false);
	cg_release_hold(s, false);
	if (!timed) {
		if (++s->samples.declined >= CG_HOLD_DECLINED)
			s->samples.skip = CG_HOLD_SKIP;
		return;
	}
	e->be->time_end(e->be_ctx, s->be_stream, true);
	s->samples.declined = 0;
	__atomic_fetch_add(&e->timed, 1, __ATOMIC_RELAXED);
	t->timed_eager++;
	t->learn_samples++;
	ST(s, learning_samples, 1);
	t->timed_at = t->launched;
}

/* ---- cut anew: exposed chunks in two, the ops before a variant kept eager ---------------- */

/* Is the chunk learned so far cut anew here (cg_cut_exposed, cg_cut_variant, below)? Never
 * where a short loop is cut in units: its units are its chunks. */
bool cg_split_here(const struct cg_stream *s)
{
	if (s->per.unit)
		return false;
	for (uint32_t i = 0; i < s->nsplit; i++)
		if (s->split_n[i] == s->sc.n && s->split_key[i] == cg_scratch_key(&s->sc))
			return true;
	return false;
}

/* Cut where the first `n` ops of `t` are a chunk's first ones (false: known, or no room). */
static bool add_split(struct cg_stream *s, const struct cg_chunk *t, uint32_t n)
{
	uint64_t key = cg_chunk_prefix_key(t, n);
	for (uint32_t i = 0; i < s->nsplit; i++)
		if (s->split_n[i] == n && s->split_key[i] == key)
			return false;
	if (s->nsplit == CG_SPLITS)
		return false;
	s->split_key[s->nsplit] = key;
	s->split_n[s->nsplit++] = n;
	return true;
}

/* An exposed chunk (cg_stream_timing) is learned again in two parts, cut after its first half
 * wherever those ops come as a chunk's first ones: the first part's graph starts on the GPU
 * while the host still submits the rest, and only the last part's time is waited for whole;
 * that part is timed and judged as a chunk of its own, and cut again if exposed in turn. The
 * first part has CG_SPLIT_MIN ops at least: the cut is where that chunk's first part ends, not
 * after every op like its middle one, and a kernel that recurs all over the loop would cut
 * every chunk that begins with it short. The last part may be one op, whose graph, launched as
 * the op comes, ends no later than the op launched eagerly would (a graph launch takes less
 * host time than a kernel launch). An exposed chunk of two ops is cut after its first: both
 * parts are one op, and of a Python loop's last ops before `.item()` none stays eager. (Its
 * first op's graph then also runs alone where another chunk begins with that launch and goes
 * on with ops no graph holds after it, as any armed chunk does: one graph launch more there.)
 * A short loop with an exposed chunk (its whole unit, or a chunk learned before its period was
 * found) is also cut at half its unit's length from then on, at its period's anchor, instead of
 * at its units. */
void cg_cut_exposed(struct cg_stream *s, const struct cg_chunk *t)
{
	if (t->n < 2)
		return;
	bool cut = false;
	if (s->per.unit) {
		uint32_t unit = s->per.unit;
		cg_loop_no_units(&s->per);
		s->len_max = (t->n > unit ? t->n : unit) / 2;
		cut = true;
	}
	uint32_t half = t->n / 2 > CG_SPLIT_MIN ? t->n / 2 : CG_SPLIT_MIN;
	if (t->n <= CG_SPLIT_MIN)
		half = 1;  /* a chunk of two: one op each */
	cut |= add_split(s, t, half);
	if (cut)
		ST(s, exposed_splits, 1);
}

/* A divergence after `at` deferred ops led into chunk `t`, a variant of this place that runs
 * eagerly for good (its graph cost more than it saved, or a wait right after exposed it): each
 * time it comes, the armed variant's first `at` ops, deferred, would diverge again. They are
 * learned as a chunk of their own: the graph of those ops runs for either variant, and the op
 * after them starts the next chunk, whichever it is. */
void cg_cut_variant(struct cg_stream *s, const struct cg_chunk *t, uint32_t at)
{
	if (t->state != CG_CHUNK_DISABLED || at < CG_SPLIT_MIN || at >= t->n)
		return;
	if (add_split(s, t, at))
		ST(s, variant_splits, 1);
}
