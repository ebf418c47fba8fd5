/* Coverage property of the policy engine: a deterministic loop, whatever its period (1 to 5,000
 * ops), prologue, identical sub-blocks (layers) and occasional extra work, replays at least
 * 95% of its ops once WARMUP+2 of its iterations have passed, and runs exactly what it
 * submitted; short loops with a host copy every few iterations (shaped like a cuBLAS program
 * with a checksum every 10 steps) replay at least 92% of all their ops. */
#include <math.h>
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

#define TRACES 120
#define MAX_PERIOD 5000
#define KINDS 64          /* most distinct kernels a loop uses */
#define MEASURED 40       /* iterations measured after the warm-up ones */
/* A loop of fewer than 8 ops (one kernel, two) is cut into units of 32 ops, half a chunk (so
 * that tiny kernels do not pay a graph launch every few of them): it is found repeating after
 * two of the period detector's 8-op contexts, then its first unit is seen WARMUP times and the
 * next one replays. It is given that many ops of warm-up (at least WARMUP+2 iterations), and
 * its measured window at least MEASURED chunks of ops (so that the chunk still deferred at the
 * end does not decide it). */
#define SHORT_LOOP 8
#define SHORTEST 96


struct loop {
	uint32_t period, prologue, kinds;
	uint32_t body[MAX_PERIOD];
	unsigned char sig[KINDS + 1][40];  /* the last one: extra work, never in the body */
	bool sync;                         /* the program syncs at the end of each iteration */
	uint32_t extra_ppm;                /* iterations with one extra op somewhere, per million
	                                      (a loop shorter than a chunk: per chunk of it) */
	bool loads;                        /* its first iteration loads modules: a boundary before
	                                      three of its kernels (run_timed only) */
	bool seeds;                        /* a sync before it, and its first iteration starts with
	                                      one more kernel, a generator seeding its state (the
	                                      same) */
	bool unproven;                     /* its first iteration launches one kernel with a shape
	                                      the driver had not accepted yet: the shim runs it
	                                      itself, after a boundary (the same) */
};

/* A period drawn log-uniformly (short loops as likely as long ones), its body made of
 * `kinds` kernels, often as a block repeated several times (identical layers) then a tail. */
static void make_loop(struct loop *l, struct rng *r, uint32_t period)
{
	memset(l, 0, sizeof(*l));
	l->period = period;
	l->kinds = 1 + below(r, period < KINDS ? period : KINDS);
	for (uint32_t k = 0; k <= KINDS; k++)
		for (uint32_t b = 0; b < sizeof(l->sig[k]); b++)
			l->sig[k][b] = (unsigned char)rnd(r);
	uint32_t layers = period >= 8 && chance(r, 500) ? 2 + below(r, 11) : 1;
	uint32_t block = period / (layers + 1);
	for (uint32_t i = 0; i < period; i++) {
		bool in_layers = layers > 1 && i < layers * block;
		l->body[i] = in_layers && i >= block ? l->body[i % block] : below(r, l->kinds);
	}
	l->prologue = below(r, 2 * period + 10);
	l->sync = chance(r, 400);
	l->extra_ppm = chance(r, 500) ? 0 : 20000;
}

static uint32_t draw_period(struct rng *r)
{
	return (uint32_t)exp(log(MAX_PERIOD) * (double)below(r, 1000001) / 1e6);
}

struct run {
	struct fake_backend fb;
	struct cg_engine *e;
	struct cg_stream *s;
	uint64_t step;
};

static void submit_as(struct run *w, const struct loop *l, uint32_t kind, uint32_t pos,
                      bool passed)
{
	/* a pointer that moves every iteration, a step counter, a constant */
	uint64_t args[3] = { 0x7000000ull + pos * 4096 + (w->step / 7) * 0x100000, w->step, kind };
	struct cg_op op = { .sig = l->sig[kind], .sig_len = sizeof(l->sig[kind]), .args = args,
	                    .args_len = sizeof(args) };
	w->step++;
	if (passed)
		fake_pass(&w->fb, w->s, 0, &op);
	else
		fake_submit(&w->fb, w->s, 0, &op);
}

static void submit(struct run *w, const struct loop *l, uint32_t kind, uint32_t pos)
{
	submit_as(w, l, kind, pos, false);
}

static void iteration(struct run *w, struct rng *r, const struct loop *l)
{
	uint32_t extra_at = below(r, 1000000) < l->extra_ppm ? below(r, l->period) : UINT32_MAX;
	for (uint32_t i = 0; i < l->period; i++) {
		if (i == extra_at)
			submit(w, l, KINDS, 99999);
		submit(w, l, l->body[i], i);
	}
	if (l->sync)
		fake_boundary(&w->fb, w->s, 0, CG_R_SYNC);
}

/* Iterations of the program's loop before it replays: WARMUP+2, or SHORTEST ops for a loop of
 * fewer than SHORT_LOOP ops. */
static uint32_t warmup_iterations(const struct loop *l, const struct cg_engine_config *cfg)
{
	uint32_t it = cfg->warmup + 2, shortest = (SHORTEST + l->period - 1) / l->period;
	return l->period >= SHORT_LOOP || it > shortest ? it : shortest;
}

/* Share of the ops after the warm-up iterations that ran inside graphs; *first: the iteration
 * (from 1) in which the first op was replayed. */
static double run_loop(struct loop *l, struct rng *r, const struct cg_engine_config *cfg,
                       uint64_t *measured, uint32_t *first)
{
	struct run w;
	memset(&w, 0, sizeof(w));
	fake_backend_init(&w.fb, 7);
	w.e = cg_engine_new(cfg, &w.fb.table, &w.fb);
	assert_non_null(w.e);
	w.s = cg_stream_new(w.e, fake_stream(0), 0);
	assert_non_null(w.s);
	for (uint32_t i = 0; i < l->prologue; i++)
		submit(&w, l, below(r, l->kinds), 50000 + i);
	/* extra work keeps its rate per chunk of ops in a loop shorter than a chunk */
	uint32_t per = l->period >= cfg->chunk_max ? 1 : (cfg->chunk_max + l->period - 1) / l->period;
	uint32_t skip = warmup_iterations(l, cfg);
	l->extra_ppm /= per;
	struct cg_stats before, after;
	*first = 0;
	for (uint32_t it = 0; it < skip; it++) {
		iteration(&w, r, l);
		cg_engine_stats(w.e, &before);
		if (!*first && before.ops_replayed)
			*first = it + 1;
	}
	for (uint32_t it = 0; it < MEASURED * per; it++) {
		iteration(&w, r, l);
		if (!*first) {
			cg_engine_stats(w.e, &after);
			if (after.ops_replayed)
				*first = skip + it + 1;
		}
	}
	cg_stream_free(w.s, CG_R_NONE);
	cg_engine_stats(w.e, &after);
	cg_engine_free(w.e, false);
	char msg[128];
	if (!fake_backend_same(&w.fb, msg, sizeof(msg)))
		fail_msg("period %u: %s", l->period, msg);
	assert_int_equal(w.fb.contract_errors, 0);
	assert_int_equal(w.fb.graphs_alive, 0);
	assert_int_equal(after.ops, after.ops_replayed + after.ops_eager);
	fake_backend_fini(&w.fb);
	*measured = after.ops - before.ops;
	return (double)(after.ops_replayed - before.ops_replayed) / (double)(after.ops - before.ops);
}

static void test_every_loop_replays_after_warmup(void **state)
{
	static struct loop l;
	static const uint32_t fixed[] = { 1, 2, 3, 7, 14, 31, 32, 33, 63, 64, 65, 100, 129, 630,
	                                  1000, 4999, 5000 };
	uint32_t nfixed = sizeof(fixed) / sizeof(fixed[0]);
	double worst = 1, worst_extra = 1;
	uint64_t ops = 0, replayed = 0;
	uint32_t worst_period = 0, slowest = 0, slowest_period = 0;
	bool verbose = getenv("CG_LOOPS_VERBOSE") != NULL;
	for (uint32_t t = 0; t < TRACES; t++) {
		struct rng r = { (t + 1) * 0x9e3779b97f4a7c15ull };
		struct cg_engine_config cfg;
		cg_engine_config_default(&cfg);
		cfg.measure = false;  /* what is cut, not whether deferring pays (policy_control) */
		make_loop(&l, &r, t < nfixed ? fixed[t] : draw_period(&r));
		bool extra = l.extra_ppm != 0;
		uint64_t measured;
		uint32_t first;
		double share = run_loop(&l, &r, &cfg, &measured, &first);
		if (verbose)
			print_message("period %5u prologue %5u kinds %2u sync %d extra %u: %.3f, "
			              "first replay in iteration %u\n", l.period, l.prologue, l.kinds,
			              l.sync, l.extra_ppm, share, first);
		if (!extra && (!first || first > slowest))
			slowest = first ? first : UINT32_MAX, slowest_period = l.period;
		ops += measured;
		replayed += (uint64_t)(share * (double)measured + 0.5);
		if (extra && share < worst_extra)
			worst_extra = share;
		if (!extra && share < worst)
			worst = share, worst_period = l.period;
	}
	double total = (double)replayed / (double)ops;
	print_message("replayed after warm-up: %.4f of all ops; worst loop %.3f (period %u), "
	              "worst with extra work %.3f; latest first replay: iteration %u (period %u)\n",
	              total, worst, worst_period, worst_extra, slowest, slowest_period);
	assert_true(total >= 0.95);
	assert_true(worst >= 0.95);
	/* An extra op costs about the chunk it falls in, and one in the warm-up delays the replay
	 * by an iteration (measured worst: 0.925, a loop of 67 ops, one extra op in each part). */
	assert_true(worst_extra >= 0.92);
}

/* Long loops of two or three kernels in no order: a context of 8 ops recurs many times in an
 * iteration, so the period is found through the wide context (a loop of 3,060 ops of two
 * kernels replayed 0.61 after warm-up where only 8-op contexts proposed periods). */
static void test_loops_of_few_kernels(void **state)
{
	static struct loop l;
	static const uint32_t periods[] = { 300, 1000, 3060, 5000 };
	for (uint32_t k = 0; k < 2 * 4; k++) {
		struct rng r = { 0x7f4a7c15ull * (k + 1) };
		struct cg_engine_config cfg;
		cg_engine_config_default(&cfg);
		cfg.measure = false;
		uint32_t period = periods[k % 4];
		make_loop(&l, &r, period);
		l.kinds = 2 + k / 4;
		for (uint32_t i = 0; i < period; i++)
			l.body[i] = below(&r, l.kinds);
		l.prologue = 2 * period / 3;
		l.extra_ppm = 0;
		uint64_t measured;
		uint32_t first;
		double share = run_loop(&l, &r, &cfg, &measured, &first);
		if (getenv("CG_LOOPS_VERBOSE"))
			print_message("period %u of %u kernels: %.3f, first replay in iteration %u\n",
			              period, l.kinds, share, first);
		assert_true(share >= 0.95);
	}
}

/* Does a content-defined cut fall after an op of this signature (once the chunk has a quarter of
 * CUGRAFT_CHUNK's ops), 1 in 16 at the default chunk? */
static bool content_cut(const unsigned char sig[40])
{
	struct cg_engine_config cfg;
	cg_engine_config_default(&cfg);
	uint32_t least = cfg.chunk_max / 4, spread = cfg.chunk_max / 2 - least;
	return (cg_sig_hash(sig, 40) >> 32) < (1ull << 32) / spread;
}

/* Loops of 33 to 64 ops, units of one period (more than half a chunk), with no content-defined
 * cut anywhere and prologues of every length: where a chunk's length cut falls inside the first
 * unit, the unit's cut that follows finds a chunk shorter than the unit, which then ran on to
 * the chunk's length and was cut there, out of step with the loop, every iteration after (a loop
 * of 61 ops after 47 others replayed 0.85). */
static void test_units_longer_than_half_a_chunk(void **state)
{
	static struct loop l;
	uint32_t worst_period = 0, worst_prologue = 0;
	double worst = 1;
	for (uint32_t period = 33; period <= 64; period += 4)
		for (uint32_t prologue = 0; prologue < 64; prologue += 7) {
			struct rng r = { 0x3c6ef372ull * period + prologue };
			struct cg_engine_config cfg;
			cg_engine_config_default(&cfg);
			cfg.measure = false;
			make_loop(&l, &r, period);
			l.kinds = period;
			for (uint32_t i = 0; i < period; i++)
				l.body[i] = i;
			l.prologue = prologue;
			l.sync = false;
			l.extra_ppm = 0;
			for (uint32_t k = 0; k <= KINDS; k++)
				while (content_cut(l.sig[k]))
					for (uint32_t b = 0; b < sizeof(l.sig[k]); b++)
						l.sig[k][b] = (unsigned char)rnd(&r);
			uint64_t measured;
			uint32_t first;
			double share = run_loop(&l, &r, &cfg, &measured, &first);
			if (share < worst)
				worst = share, worst_period = period, worst_prologue = prologue;
		}
	print_message("loops of 33-64 ops, no content cut: worst %.3f (period %u, prologue %u)\n",
	              worst, worst_period, worst_prologue);
	assert_true(worst >= 0.95);
}

/* ---- short loops with host copies, the cost gate in play ---------------------------------- */

/* The backend times what the engine asks (like the shim: eager and graph runs paired by chunk,
 * handed back outside engine calls); graphs win on the GPU, so no chunk is gated off. By default
 * the kernels are tiny: the GPU is quicker than the launches, a graph a little quicker still. */
static struct {
	uint64_t key[64];
	bool graph[64], back[64];
	uint32_t n;
	bool open;
	double eager_us, graph_us;
} timed;

static bool time_begin(void *be, void *stream, uint64_t key, bool graph)
{
	if (timed.open || timed.n == 64)
		return false;
	timed.key[timed.n] = key;
	timed.graph[timed.n] = graph;
	timed.back[timed.n] = false;
	timed.open = true;
	return true;
}

static void time_end(void *be, void *stream, bool ok)
{
	assert_true(timed.open);
	timed.open = false;
	timed.n += ok;
}

static void hand_back_samples(struct cg_stream *s)
{
	for (uint32_t i = 0; i < timed.n; i++) {
		timed.back[i] = true;
		cg_stream_timing(s, timed.key[i], timed.graph[i],
		                 timed.graph[i] ? timed.graph_us : timed.eager_us);
	}
	uint32_t kept = 0;
	for (uint32_t i = 0; i < timed.n; i++)
		if (!timed.back[i]) {
			timed.key[kept] = timed.key[i];
			timed.graph[kept] = timed.graph[i];
			timed.back[kept++] = false;
		}
	timed.n = kept;
}

struct short_result {
	double all;        /* replayed share of every op, from the first */
	double after;      /* replayed share after the warm-up iterations */
	uint32_t first;    /* iteration (from 1) of the first replayed op */
	uint64_t ops, replayed;
	uint64_t learning, samples;  /* ops eager while learning, eager for the cost gate */
};

/* `iters` iterations of loop `l`, a host copy after every `every`-th one (0: none) and after
 * the last; the cost gate samples chunks as on a GPU, each taking `eager_us` eager and
 * `graph_us` graphed. */
static void run_timed(struct loop *l, uint32_t iters, uint32_t every, double eager_us,
                      double graph_us, struct short_result *out)
{
	struct cg_engine_config cfg;
	cg_engine_config_default(&cfg);
	cfg.measure = false;
	struct run w;
	memset(&w, 0, sizeof(w));
	memset(&timed, 0, sizeof(timed));
	timed.eager_us = eager_us;
	timed.graph_us = graph_us;
	fake_backend_init(&w.fb, 7);
	w.fb.table.time_begin = time_begin;
	w.fb.table.time_end = time_end;
	w.e = cg_engine_new(&cfg, &w.fb.table, &w.fb);
	assert_non_null(w.e);
	w.s = cg_stream_new(w.e, fake_stream(0), 0);
	assert_non_null(w.s);
	uint32_t skip = warmup_iterations(l, &cfg);
	struct cg_stats before = { 0 }, st;
	out->first = 0;
	for (uint32_t i = 0; i < l->prologue; i++)
		submit(&w, l, KINDS - 1 - i, 50000 + i);
	if (l->seeds)
		fake_boundary(&w.fb, w.s, 0, CG_R_SYNC);
	for (uint32_t it = 0; it < iters; it++) {
		if (l->seeds && it == 0)
			submit(&w, l, KINDS - 10, 60000);
		for (uint32_t i = 0; i < l->period; i++) {
			if (l->loads && it == 0 && (i == 2 || i == 5 || i == 9))
				fake_boundary(&w.fb, w.s, 0, CG_R_MODULE);
			submit_as(&w, l, l->body[i], i, l->unproven && it == 0 && i == 1);
			hand_back_samples(w.s);
		}
		if ((every && it % every == every - 1) || it == iters - 1)
			fake_boundary(&w.fb, w.s, 0, CG_R_HOST_COPY);
		hand_back_samples(w.s);
		cg_engine_stats(w.e, &st);
		if (!out->first && st.ops_replayed)
			out->first = it + 1;
		if (it + 1 == skip)
			before = st;
	}
	cg_stream_free(w.s, CG_R_NONE);
	cg_engine_stats(w.e, &st);
	cg_engine_free(w.e, false);
	char msg[128];
	if (!fake_backend_same(&w.fb, msg, sizeof(msg)))
		fail_msg("period %u, host copy every %u: %s", l->period, every, msg);
	assert_int_equal(w.fb.contract_errors, 0);
	assert_int_equal(w.fb.graphs_alive, 0);
	assert_int_equal(st.ops, st.ops_replayed + st.ops_eager);
	assert_int_equal(st.chunks_disabled, 0);
	fake_backend_fini(&w.fb);
	out->ops = st.ops;
	out->replayed = st.ops_replayed;
	out->all = (double)st.ops_replayed / (double)st.ops;
	out->after = (double)(st.ops_replayed - before.ops_replayed) /
	             (double)(st.ops - before.ops);
	out->learning = st.fallbacks[CG_R_LEARNING];
	out->samples = st.fallbacks[CG_R_COST_SAMPLE];
}

static void run_short(struct loop *l, uint32_t iters, uint32_t every, struct short_result *out)
{
	run_timed(l, iters, every, 2.0, 1.5, out);
}

/* conf-cublas's step: kernels around cuBLAS and cuBLASLt launches, a chaining kernel five
 * times and a squashing one three times (same signatures, other arguments); before the loop,
 * `prologue` kernels that initialise its buffers; `first`: 1, cuBLAS loads its kernels' modules
 * in the first step, where each is first launched; 2, a sync before the loop and a seeding
 * kernel in its first step (conf-curand's generator); 3, the first step's second kernel has a
 * shape the driver had not accepted yet (conf-cufft's second kernel); 4, a content-defined cut
 * falls inside the second step (as in conf-cublas and conf-curand). */
static void make_blas_step(struct loop *l, uint32_t prologue, uint32_t first)
{
	static const uint32_t step[14] = { 0, 1, 2, 3, 1, 4, 3, 5, 3, 6, 7, 1, 1, 1 };
	struct rng r = { 0x51ed2701 };
	make_loop(l, &r, 14);
	memcpy(l->body, step, sizeof(step));
	l->prologue = prologue;
	l->loads = first == 1;
	l->seeds = first == 2;
	l->unproven = first == 3;
	/* No content-defined cut in it, but with `first` 4 one after its squashing kernel (body
	 * position 7): not in the first step, where the chunk has too few ops for one, but in the
	 * second, inside the first unit the loop detector will cut. */
	for (uint32_t k = 0; k <= KINDS; k++)
		while (content_cut(l->sig[k]) != (first == 4 && k == 5))
			for (uint32_t b = 0; b < sizeof(l->sig[k]); b++)
				l->sig[k][b] = (unsigned char)rnd(&r);
}

/* 40 steps, a host copy every 10: the period is found at the end of the second step, so the
 * loop replays from the third step on (the first two are seen) but for one step's eager cost
 * sample: at least 92% of all ops replayed, counting from the prologue; also with a copy every
 * step or every 5, and 43 steps (a tail without its copy); and where the first step loads
 * modules, seeds a generator or runs a kernel of an unproven shape (its boundaries and its extra
 * kernel come once: units still start where the steps do), or where a content-defined cut falls
 * inside the second step (its first unit is whole all the same). */
static void test_short_loop_with_host_copies(void **state)
{
	static struct loop l;
	static const uint32_t every[] = { 10, 1, 5, 0 };
	bool verbose = getenv("CG_LOOPS_VERBOSE") != NULL;
	static const char *firsts[] = { "", ", modules loaded in the first",
	                                ", a generator seeded in the first",
	                                ", a shape unproven in the first",
	                                ", content cut inside the second" };
	for (uint32_t k = 0; k < 5 * 4 * 2; k++) {
		uint32_t e = k / 2 % 4, iters = k % 2 ? 43 : 40, first = k / 8;
		make_blas_step(&l, 5, first);
		struct short_result res;
		run_short(&l, iters, every[e], &res);
		if (verbose || (every[e] == 10 && iters == 40))
			print_message("14-op loop, %u steps, host copy every %u%s: replayed %.3f of "
			              "all ops (%.3f after warm-up), first replay in step %u; eager: "
			              "%llu learning, %llu cost samples\n", iters, every[e],
			              firsts[first], res.all,
			              res.after, res.first, (unsigned long long)res.learning,
			              (unsigned long long)res.samples);
		assert_true(res.first >= 1 && res.first <= 3);
		/* two steps seen, no more */
		assert_true(res.learning <= l.prologue + l.seeds + 2 * 14);
		assert_true(res.samples <= 14);       /* one eager sample: graphs win */
		assert_true(res.replayed * 100 >= res.ops * 92);  /* 92%, exactly */
		assert_true(res.after >= 0.95);
	}
}

/* The same step where its GEMMs make the graph's GPU time more than the host time it saves (yet
 * less than its ops' eager): the gate could act, so it needs an eager sample, and one replayed
 * occurrence runs eagerly for it. With a host copy every step the step's chunks are seen as
 * chunks while learned, and the second sighting, held, runs as the graph it earns: one step of
 * learning. With a copy every 10 steps the step is a unit the loop detector learns at once,
 * from ops that already ran: two. */
static void test_short_loop_eager_samples(void **state)
{
	static struct loop l;
	for (uint32_t every = 1; every <= 10; every += 9) {
		make_blas_step(&l, 0, 0);
		struct short_result res;
		run_timed(&l, 40, every, 600.0, 300.0, &res);
		print_message("14-op loop, GEMM-sized, host copy every %u: replayed %.3f of all "
		              "ops; eager: %llu learning, %llu cost samples\n", every, res.all,
		              (unsigned long long)res.learning, (unsigned long long)res.samples);
		assert_true(res.learning <= (every == 1 ? 1 : 2) * 14);
		assert_int_equal(res.samples, 14);
		assert_true(res.replayed * 1000 >= res.ops * 925);
	}
}

/* A loop of one kernel, and of two: chunks of several iterations, cut the same way each time,
 * with or without a host copy every 1, 5 or 10 iterations. */
static void test_loops_of_one_and_two_ops(void **state)
{
	static struct loop l;
	static const uint32_t every[] = { 0, 1, 5, 10 };
	bool verbose = getenv("CG_LOOPS_VERBOSE") != NULL;
	for (uint32_t period = 1; period <= 2; period++)
		for (uint32_t e = 0; e < 4; e++) {
			struct rng r = { 0x2545f491ull * period + e };
			make_loop(&l, &r, period);
			l.kinds = period;
			for (uint32_t i = 0; i < period; i++)
				l.body[i] = i;
			struct cg_engine_config cfg;
			cg_engine_config_default(&cfg);
			uint32_t skip = warmup_iterations(&l, &cfg);
			uint32_t iters = skip + MEASURED * (cfg.chunk_max + period - 1) / period + 3;
			struct short_result res;
			run_short(&l, iters, every[e], &res);
			if (verbose)
				print_message("%u-op loop, host copy every %u: replayed %.3f of all ops "
				              "(%.3f after %u iterations), first replay in iteration %u\n",
				              period, every[e], res.all, res.after, skip, res.first);
			assert_true(res.first >= 1 && res.first <= skip);
			assert_true(res.after >= 0.95);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_loop_replays_after_warmup),
		cmocka_unit_test(test_loops_of_few_kernels),
		cmocka_unit_test(test_units_longer_than_half_a_chunk),
		cmocka_unit_test(test_short_loop_with_host_copies),
		cmocka_unit_test(test_short_loop_eager_samples),
		cmocka_unit_test(test_loops_of_one_and_two_ops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
