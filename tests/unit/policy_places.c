/* Prediction by place: a training step whose chunks recur at several places (identical layers,
 * forward and backward, a last layer that ends differently, .item() syncs) must not keep
 * diverging once warm, also where some chunks lost their graphs for good (the cost gate, a
 * chunk the host waits for): the chunk that starts with the same op elsewhere is no reason to
 * defer here. Every trace runs exactly what it submitted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fake_backend.h"
#include "rng.h"
#include "policy/engine.h"

#define SEEDS 40
#define LAYERS 12
#define STEPS 40
#define KINDS 48  /* kernels of the layers, loss, optimizer and the last layer's own */

struct trainer {
	unsigned char sig[KINDS][40];
	uint32_t fwd, bwd, nopt;
	uint32_t f[64], b[64], last_f[64], last_b[64], emb[8], loss[8], opt[40];
	bool syncs;  /* loss.item() after the forward pass, a sync after the optimizer */
};

/* Layers made of a few kernels (gemms, elementwise, reductions), so that many chunks start
 * with the same kernel; the last layer ends differently, forward and backward. */
static void make_trainer(struct trainer *t, struct rng *r, uint32_t seed)
{
	memset(t, 0, sizeof(*t));
	for (int k = 0; k < KINDS; k++)
		for (int i = 0; i < 40; i++)
			t->sig[k][i] = (unsigned char)rnd(r);
	uint32_t kinds = 6 + below(r, 20);
	t->fwd = 6 + below(r, 40);
	t->bwd = 8 + below(r, 50);
	for (uint32_t i = 0; i < t->fwd; i++)
		t->f[i] = t->last_f[i] = below(r, kinds);
	for (uint32_t i = 0; i < t->bwd; i++)
		t->b[i] = t->last_b[i] = below(r, kinds);
	for (uint32_t i = t->fwd - 1 - below(r, t->fwd / 2 + 1); i < t->fwd; i++)
		t->last_f[i] = below(r, kinds + 10);
	for (uint32_t i = 0; i < 1 + below(r, t->bwd / 3 + 1); i++)
		t->last_b[i] = below(r, kinds + 10);
	for (int i = 0; i < 8; i++)
		t->emb[i] = below(r, kinds + 20), t->loss[i] = below(r, kinds + 20);
	t->nopt = 5 + below(r, 35);
	for (uint32_t i = 0; i < t->nopt; i++)
		t->opt[i] = below(r, KINDS);
	t->syncs = seed % 4 != 0;
}

/* The cost gate's samples, as the shim's backend takes them: every sampled run of a chunk, fed
 * back after the step. Each chunk does a lot of GPU work (graph or not: the chunk the host waits
 * for at a sync is then not worth its graph), and one in ten runs slower as a graph. */
static struct sample {
	uint64_t key;
	bool graph;
} samples[4096], running;
static int nsamples;

static bool sample_begin(void *be, void *stream, uint64_t key, bool graph)
{
	running = (struct sample){ key, graph };
	return true;
}

static void sample_end(void *be, void *stream, bool ok)
{
	if (ok && nsamples < 4096)
		samples[nsamples++] = running;
}

static void feed_samples(struct cg_stream *s)
{
	for (int i = 0; i < nsamples; i++) {
		if (!samples[i].graph)
			continue;  /* one call per pair: the graph's sample, with its eager twin's time */
		bool slower = (samples[i].key * 0x9e3779b97f4a7c15ull >> 40) % 10 == 0;
		cg_stream_timing(s, samples[i].key, 300.0, slower ? 950.0 : 300.0);
	}
	nsamples = 0;
}

struct figures {
	uint64_t ops, replayed, divergences, diverged_ops, gated;
};

/* One stream of an engine on the fake backend, which times its samples where `timed`. */
struct rig {
	struct fake_backend fb;
	struct cg_engine *e;
	struct cg_stream *s;
};

static void rig_up(struct rig *g, uint32_t warmup, bool timed)
{
	struct cg_engine_config cfg;
	cg_engine_config_default(&cfg);
	cfg.measure = false;  /* what is deferred, not whether deferring pays (policy_control) */
	if (warmup)
		cfg.warmup = warmup;
	fake_backend_init(&g->fb, 7);
	if (timed)
		g->fb.table.time_begin = sample_begin, g->fb.table.time_end = sample_end;
	nsamples = 0;
	g->e = cg_engine_new(&cfg, &g->fb.table, &g->fb);
	assert_non_null(g->e);
	g->s = cg_stream_new(g->e, fake_stream(0), 0);
	assert_non_null(g->s);
}

/* Frees the stream (unless the test did) and the engine; the fake ran exactly the work
 * submitted, in order, and no graph is left. */
static void rig_down(struct rig *g)
{
	if (g->s)
		cg_stream_free(g->s, CG_R_NONE);
	cg_engine_free(g->e, false);
	char msg[128];
	if (!fake_backend_same(&g->fb, msg, sizeof(msg)))
		fail_msg("%s", msg);
	assert_int_equal(g->fb.contract_errors, 0);
	assert_int_equal(g->fb.graphs_alive, 0);
	fake_backend_fini(&g->fb);
}

static void op(struct fake_backend *fb, struct cg_stream *s, const struct trainer *t, uint32_t k,
               uint64_t pos, uint64_t step)
{
	uint64_t args[3] = { 0x7000000ull + pos * 4096, step, k };
	struct cg_op o = { .sig = t->sig[k], .sig_len = 40, .args = args, .args_len = 24 };
	fake_submit(fb, s, 0, &o);
}

static void step(struct fake_backend *fb, struct cg_stream *s, const struct trainer *t,
                 uint64_t st)
{
	uint64_t pos = 0;
	for (int i = 0; i < 4; i++)
		op(fb, s, t, t->emb[i], pos++, st);
	for (int l = 0; l < LAYERS; l++)
		for (uint32_t i = 0; i < t->fwd; i++)
			op(fb, s, t, l == LAYERS - 1 ? t->last_f[i] : t->f[i], pos++, st);
	for (int i = 0; i < 6; i++)
		op(fb, s, t, t->loss[i], pos++, st);
	if (t->syncs)
		fake_boundary(fb, s, 0, CG_R_SYNC);
	for (int l = LAYERS - 1; l >= 0; l--)
		for (uint32_t i = 0; i < t->bwd; i++)
			op(fb, s, t, l == LAYERS - 1 ? t->last_b[i] : t->b[i], pos++, st);
	for (uint32_t i = 0; i < t->nopt; i++)
		op(fb, s, t, t->opt[i], pos++, st);
	if (t->syncs)
		fake_boundary(fb, s, 0, CG_R_SYNC);
}

/* Runs STEPS steps and returns the figures of those from `from` on. */
static struct figures run(const struct trainer *t, bool timed, int from)
{
	struct rig g;
	rig_up(&g, 0, timed);
	struct cg_stats a, b;
	for (int st = 0; st < STEPS; st++) {
		if (st == from)
			cg_engine_stats(g.e, &a);
		step(&g.fb, g.s, t, (uint64_t)st);
		feed_samples(g.s);
	}
	cg_engine_stats(g.e, &b);
	rig_down(&g);
	uint64_t gated = 0;
	for (int r = 0; r < CG_R_COUNT; r++)
		if (r == CG_R_COST_GATE || r == CG_R_EXPOSED || r == CG_R_COST_SAMPLE)
			gated += b.fallbacks[r] - a.fallbacks[r];
	return (struct figures){ b.ops - a.ops, b.ops_replayed - a.ops_replayed,
	                         b.divergences - a.divergences,
	                         b.fallbacks[CG_R_DIVERGENCE] - a.fallbacks[CG_R_DIVERGENCE], gated };
}

/* Without cost samples every chunk keeps its graph: after WARMUP+2 steps, at least 95% of the
 * work replays and at most one step in ten diverges. */
static void test_layers_replay_after_warmup(void **state)
{
	static struct trainer t;
	struct figures sum = { 0 };
	double worst = 1;
	for (uint32_t seed = 1; seed <= SEEDS; seed++) {
		struct rng r = { seed * 0x9e3779b97f4a7c15ull };
		make_trainer(&t, &r, seed);
		struct figures f = run(&t, false, 3 + 2);
		double share = (double)f.replayed / (double)f.ops;
		if (share < worst)
			worst = share;
		sum.ops += f.ops, sum.replayed += f.replayed, sum.divergences += f.divergences;
	}
	double per_step = (double)sum.divergences / (SEEDS * (STEPS - 5));
	print_message("replayed %.4f (worst %.3f), %.3f divergences per step\n",
	              (double)sum.replayed / (double)sum.ops, worst, per_step);
	assert_true(worst >= 0.95);
	assert_true(per_step <= 0.1);
}

/* With cost samples, chunks the host waits for and chunks whose graph is slower run eagerly for
 * good. Once the samples are in (15 steps), the other chunks' work replays (95% of what is not
 * eager for cost) and steps hardly diverge. Before prediction by place, an armed chunk starting
 * with the same kernel was deferred there and diverged every step: 2.1 divergences per step
 * (12 in the worst trace), 7.1% of the work run eagerly because of them, 92.5% of the rest
 * replayed (39% in the worst trace). */
static void test_layers_with_eager_chunks_do_not_diverge(void **state)
{
	static struct trainer t;
	struct figures sum = { 0 };
	double worst = 0, worst_share = 1;
	for (uint32_t seed = 1; seed <= SEEDS; seed++) {
		struct rng r = { seed * 0x9e3779b97f4a7c15ull };
		make_trainer(&t, &r, seed);
		struct figures f = run(&t, true, 15);
		double per_step = (double)f.divergences / (STEPS - 15);
		double share = (double)f.replayed / (double)(f.ops - f.gated);
		if (per_step > worst)
			worst = per_step;
		if (share < worst_share)
			worst_share = share;
		sum.ops += f.ops, sum.replayed += f.replayed, sum.divergences += f.divergences;
		sum.diverged_ops += f.diverged_ops, sum.gated += f.gated;
	}
	double per_step = (double)sum.divergences / (SEEDS * (STEPS - 15));
	print_message("%.3f divergences per step (worst trace %.2f), %.4f of the work diverged; "
	              "replayed %.4f of what is not eager for cost (worst %.3f)\n", per_step, worst,
	              (double)sum.diverged_ops / (double)sum.ops,
	              (double)sum.replayed / (double)(sum.ops - sum.gated), worst_share);
	assert_true(per_step <= 0.1);
	assert_true(worst <= 0.5);
	assert_true(worst_share >= 0.95);
}

/* Decoding over a growing context: the same 3 layers every token, where cuBLAS picks another
 * kernel at some places as the length changes (alignment, size thresholds): here at three
 * places, by the token's index modulo 4, 2 and 3. Every combination recurs, so each is learned
 * and replays, except that a graph holding the third place's rarer kernel is slower than its
 * ops (its samples say so), so the cost gate keeps that variant's chunk eager for good. That
 * variant diverged every time it came, the armed variant's ops before it deferred in vain (0.31
 * divergences a token over these 20 traces, 83.5% replayed), until those ops became a chunk of
 * their own (0.006 a token, 95.7% replayed: the few while each variant is learned). */
static struct {
	const unsigned char *sig;      /* the kernel whose graphs are slow */
	bool built_slow;               /* the latest graph built holds it */
	uint64_t key[256];             /* chunks whose graphs hold it */
	int n;
	int (*build)(void *, void *, const struct cg_op *, uint32_t, bool, void **,
	             const char **);
	void (*event)(void *, const struct cg_event *);
} slow;

static int slow_build(void *be, void *stream, const struct cg_op *ops, uint32_t n, bool share,
                      void **graph, const char **detail)
{
	slow.built_slow = false;
	for (uint32_t i = 0; i < n; i++)
		slow.built_slow |= ops[i].sig_len == 40 && !memcmp(ops[i].sig, slow.sig, 40);
	return slow.build(be, stream, ops, n, share, graph, detail);
}

static void slow_event(void *be, const struct cg_event *ev)
{
	if (ev->kind == CG_EV_GRAPH_BUILT && slow.built_slow && slow.n < 256)
		slow.key[slow.n++] = ev->chunk_key;
	slow.event(be, ev);
}

static void slow_samples(struct cg_stream *s)
{
	for (int i = 0; i < nsamples; i++) {
		if (!samples[i].graph)
			continue;
		bool slower = false;
		for (int j = 0; j < slow.n; j++)
			slower |= slow.key[j] == samples[i].key;
		cg_stream_timing(s, samples[i].key, false, 300.0);
		cg_stream_timing(s, samples[i].key, true, slower ? 950.0 : 300.0);
	}
	nsamples = 0;
}

static void test_variant_eager_for_good_does_not_diverge(void **state)
{
	static struct trainer t;
	enum { TRACES = 20, TOKENS = 600, FROM = 100 };
	uint64_t divergences = 0, disabled = 0, ops = 0, replayed = 0;
	for (uint32_t seed = 1; seed <= TRACES; seed++) {
		struct rng r = { seed * 0x9e3779b97f4a7c15ull };
		make_trainer(&t, &r, seed);
		struct rig g;
		rig_up(&g, 0, true);
		memset(&slow, 0, sizeof(slow));
		slow.sig = t.sig[44];
		slow.build = g.fb.table.build, g.fb.table.build = slow_build;
		slow.event = g.fb.table.event, g.fb.table.event = slow_event;
		struct cg_stats a, b;
		for (uint32_t tok = 0; tok < TOKENS; tok++) {
			if (tok == FROM)
				cg_engine_stats(g.e, &a);
			uint64_t pos = 0;
			for (int l = 0; l < 3; l++)
				for (uint32_t i = 0; i < 18; i++) {
					uint32_t k = t.f[i % t.fwd];
					if (i == 5)
						k = tok % 4 ? 41 : 40;
					if (i == 11)
						k = tok % 2 ? 43 : 42;
					if (i == 15 && l == 2)
						k = tok % 3 ? 45 : 44;
					op(&g.fb, g.s, &t, k, pos++, tok);
				}
			for (int i = 0; i < 4; i++)
				op(&g.fb, g.s, &t, t.loss[i], pos++, tok);
			fake_boundary(&g.fb, g.s, 0, CG_R_SYNC);  /* the token read */
			slow_samples(g.s);
		}
		cg_engine_stats(g.e, &b);
		divergences += b.divergences - a.divergences;
		disabled += b.chunks_disabled;
		ops += b.ops - a.ops;
		replayed += b.ops_replayed - a.ops_replayed;
		rig_down(&g);  /* every op ran once, in order, with its arguments */
	}
	double per_token = (double)divergences / (TRACES * (TOKENS - FROM));
	print_message("%.3f divergences a token, %lu chunks eager for good, replayed %.3f\n",
	              per_token, (unsigned long)disabled, (double)replayed / (double)ops);
	assert_true(disabled >= TRACES);
	assert_true(per_token <= 0.02);
}

/* The sites where deferred work keeps diverging, for the report: the same kernel arriving where
 * the chunk expected another counts at one site (by name, whatever its signature), names are
 * copied (cut to CG_SITE_NAME - 1 bytes), an op without one is named by its hash. */
static void submit_named(struct fake_backend *fb, struct cg_stream *s, const unsigned char *sig,
                         const char *name, uint64_t step)
{
	uint64_t args[3] = { 0x7000000ull, step, 1 };
	struct cg_op o = { .sig = sig, .sig_len = 40, .args = args, .args_len = 24, .name = name };
	fake_submit(fb, s, 0, &o);
}

static void test_divergence_sites(void **state)
{
	enum { OPS = 40, ODD = 25 };
	static unsigned char sig[OPS + 3][40];
	static char names[OPS][8], long_name[300];
	struct rng r = { 99 };
	for (int k = 0; k < OPS + 3; k++)
		for (int i = 0; i < 40; i++)
			sig[k][i] = (unsigned char)rnd(&r);
	for (int k = 0; k < OPS; k++)
		snprintf(names[k], sizeof(names[k]), "k%d", k);
	memset(long_name, 'x', sizeof(long_name) - 1);
	struct rig g;
	rig_up(&g, 3, false);  /* warmup 3: the variant's prefix gets its graph after steps 10-12 */
	/* Steps 10 to 12 run another kernel named "odd" at op ODD (another signature each time),
	 * step 13 one with a long name, step 14 one without a name. */
	for (int st = 0; st < 15; st++) {
		for (int k = 0; k < OPS; k++) {
			bool odd = k == ODD && st >= 10;
			const char *name = !odd ? names[k] : st < 13 ? "odd" : st == 13 ? long_name : NULL;
			submit_named(&g.fb, g.s, odd ? sig[OPS + (st < 13 ? st - 10 : 2)] : sig[k], name,
			             (uint64_t)st);
		}
		fake_boundary(&g.fb, g.s, 0, CG_R_SYNC);
	}
	uint32_t at = g.fb.last_divergence.chunk_ops;  /* where it diverged in the chunk */
	struct cg_divergence_site site[4];
	uint32_t n = cg_engine_divergence_sites(g.e, site, 4);
	assert_int_equal(n, 3);
	assert_int_equal(site[0].count, 3);
	assert_string_equal(site[0].expected, "k25");
	assert_string_equal(site[0].got, "odd");
	assert_int_equal(site[0].at, at);
	assert_true(site[0].ops > at);
	/* the stream's ops, from 0: the first time in step 10, the latest in step 12 */
	assert_int_equal(site[0].first_op, 10 * OPS + ODD);
	assert_int_equal(site[0].last_op, 12 * OPS + ODD);
	assert_int_equal(strlen(site[1].got), CG_SITE_NAME - 1);
	assert_int_equal(site[1].count, 1);
	assert_int_equal(site[1].first_op, 13 * OPS + ODD);
	assert_int_equal(site[1].last_op, 13 * OPS + ODD);
	assert_true(site[2].got[0] == '#' && strlen(site[2].got) == 17);
	assert_int_equal(cg_engine_divergence_sites(g.e, site, 1), 1);
	assert_int_equal(site[0].count, 3);
	cg_stream_free(g.s, CG_R_NONE);
	g.s = NULL;
	/* the sites outlive the stream (and its kernel names) */
	assert_int_equal(cg_engine_divergence_sites(g.e, site, 4), 3);
	rig_down(&g);
}

/* A loop whose event record moves each iteration (conf_events: a progress marker after the
 * k-th of four kernels, k = it % 5, recorded and polled): its chunks, cut at the records, recur
 * once in five iterations, each at a place of its own. When one comes for the sighting that
 * arms it, an armed chunk that starts alike (the variant with the marker one kernel earlier) is
 * no reason to defer it: that could only diverge, or be cut by the record while still a prefix,
 * and the sighting would lose the graph it earns where its learning holds it. */
static void moving_event(uint32_t warmup, struct cg_stats *st)
{
	enum { MIX, SCALE, CHAIN, FLAG, KIND_N, ITERS = 40 };
	static unsigned char sig[KIND_N][40];
	struct rng r = { 5 };
	for (int k = 0; k < KIND_N; k++)
		for (int i = 0; i < 40; i++)
			sig[k][i] = (unsigned char)rnd(&r);
	struct rig g;
	rig_up(&g, warmup, true);
	struct fake_backend *fb = &g.fb;
	struct cg_stream *s = g.s;
	uint64_t ops = 0;
	for (int it = 0; it < ITERS; it++) {
		uint64_t tag = (uint64_t)it << 4;
		fake_boundary(fb, s, 0, CG_R_EVENT);  /* t0 */
		submit_named(fb, s, sig[MIX], "mix", (uint64_t)it);
		submit_named(fb, s, sig[SCALE], "scale", 0);
		ops += 2;
		for (int k = 0; k < 4; k++) {
			submit_named(fb, s, sig[CHAIN], "chain", tag++);
			ops++;
			if (k == it % 5) {
				submit_named(fb, s, sig[FLAG], "flag", (uint64_t)(it * 8 + k));
				ops++;
				fake_boundary(fb, s, 0, CG_R_EVENT);  /* recorded, then polled */
			}
		}
		fake_boundary(fb, s, 0, CG_R_EVENT);  /* produced */
		fake_boundary(fb, s, 0, CG_R_SYNC);
		nsamples = 0;
	}
	cg_engine_stats(g.e, st);
	assert_int_equal(st->ops, ops);
	rig_down(&g);
}

static void test_moving_event_learns_without_diverging(void **state)
{
	for (uint32_t warmup = 2; warmup <= 3; warmup++) {
		struct cg_stats st;
		moving_event(warmup, &st);
		/* 8 chunks in 34 ops, each graphed at sighting `warmup` (iterations 5 to 9, or 10
		 * to 14), which runs as its graph: only learning runs eagerly, and the first chunk's
		 * second sighting, which came at no place yet (after nothing, the first time): held
		 * for the chunk last seen starting alike, it diverged from it and ran eagerly */
		assert_int_equal(st.chunks_learned, 8);
		assert_int_equal(st.ops_eager, 34 * (warmup - 1) + (warmup == 2 ? 4 : 0));
		assert_int_equal(st.fallbacks[CG_R_LEARNING], st.ops_eager);
		assert_int_equal(st.divergences, 0);
		assert_int_equal(st.fallbacks[CG_R_EVENT], 0);
		/* each chunk's sightings before its graph but its first were its eager samples, but
		 * for the first chunk's second */
		assert_int_equal(st.learning_samples, warmup == 2 ? 0 : 7);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layers_replay_after_warmup),
		cmocka_unit_test(test_layers_with_eager_chunks_do_not_diverge),
		cmocka_unit_test(test_divergence_sites),
		cmocka_unit_test(test_variant_eager_for_good_does_not_diverge),
		cmocka_unit_test(test_moving_event_learns_without_diverging),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
