/* Property test of the policy engine: thousands of seeded random programs (prologues, loops
 * with variants, noise ops, drifting pointers and scalars, boundaries and flushes anywhere, two
 * interleaved streams, random configurations and injected graph failures). Whatever happens,
 * each stream must run exactly the ops it submitted, in order, with their bytes, once. */
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

#define TRACES 5000
#define MAX_KERNELS 40
#define MAX_BODY 120


struct kernel {
	uint32_t sig_len, args_len;
	unsigned char sig[136];
};

/* One stream's program: a prologue, then a loop body (or its variant, as after a shape
 * change) with per-position argument behaviour. */
struct program {
	uint32_t nkernels, body_len, prologue, iters;
	struct kernel k[MAX_KERNELS];
	uint32_t body[MAX_BODY], variant[MAX_BODY];
	uint8_t arg_mode[MAX_BODY];   /* 0 constant, 1 pointer drift, 2 scalar per launch, 3 noise */
	uint32_t iter, pos;
	bool use_variant;
	bool collide;                 /* hand the engine colliding hashes: it must memcmp */
	uint64_t launches;
};

static void make_program(struct program *p, struct rng *r)
{
	static const uint32_t sig_lens[] = { 8, 24, 40, 96, 100, 136 };
	static const uint32_t args_lens[] = { 0, 4, 8, 16, 64, 72 };
	memset(p, 0, sizeof(*p));
	p->nkernels = 2 + below(r, MAX_KERNELS - 1);
	for (uint32_t i = 0; i < p->nkernels; i++) {
		struct kernel *k = &p->k[i];
		k->sig_len = sig_lens[below(r, 6)];
		k->args_len = args_lens[below(r, 6)];
		for (uint32_t b = 0; b < k->sig_len; b++)
			k->sig[b] = (unsigned char)rnd(r);
	}
	p->body_len = 1 + below(r, MAX_BODY);
	for (uint32_t i = 0; i < p->body_len; i++) {
		p->body[i] = p->variant[i] = below(r, p->nkernels);
		if (chance(r, 100))
			p->variant[i] = below(r, p->nkernels);
		p->arg_mode[i] = chance(r, 700) ? 0 : (uint8_t)(1 + below(r, 3));
	}
	p->collide = chance(r, 100);
	p->prologue = below(r, 30);
	p->iters = 3 + below(r, 35);
}

static struct cg_op make_op(struct program *p, struct rng *r, uint32_t kernel, uint32_t pos,
                            uint8_t mode, unsigned char *args)
{
	const struct kernel *k = &p->k[kernel];
	uint64_t words[9] = { 0x7000000ull + pos * 4096, 1, kernel, pos, 5, 6, 7, 8, 9 };
	if (mode == 1)
		words[0] += (uint64_t)p->iter * 0x100000;
	else if (mode == 2)
		words[1] = p->launches;
	else if (mode == 3)
		words[below(r, 9)] = rnd(r);
	memcpy(args, words, k->args_len);
	p->launches++;
	return (struct cg_op){ .sig = k->sig, .args = args, .sig_len = k->sig_len,
	                       .args_len = k->args_len, .hash = p->collide ? 1 + kernel % 2 : 0 };
}

struct world {
	struct fake_backend fb;
	struct cg_engine *e;
	struct cg_stream *s[2];
	struct program prog[2];
	struct cg_engine_config cfg;
};

/* Advance stream `id` by one action. False once its program is over. */
static bool step(struct world *w, struct rng *r, uint32_t id)
{
	struct program *p = &w->prog[id];
	struct cg_stream *s = w->s[id];
	unsigned char args[80];
	struct cg_op op;

	if (p->iter == p->iters)
		return false;
	if (p->prologue || chance(r, 30)) {  /* prologue or noise: anything, anywhere */
		p->prologue -= p->prologue > 0;
		op = make_op(p, r, below(r, p->nkernels), 1000, 3, args);
		fake_submit(&w->fb, s, id, &op);
	} else if (p->pos < p->body_len) {
		uint32_t kernel = p->use_variant ? p->variant[p->pos] : p->body[p->pos];
		op = make_op(p, r, kernel, p->pos, p->arg_mode[p->pos], args);
		fake_submit(&w->fb, s, id, &op);
		p->pos++;
	} else {
		if (chance(r, 800))
			fake_boundary(&w->fb, s, id, CG_R_SYNC);
		p->iter++;
		p->pos = 0;
		if (chance(r, 150))
			p->use_variant = !p->use_variant;
	}
	if (chance(r, 20))  /* a sync marks the chunk launched there as waited for (EXPOSED) */
		fake_boundary(&w->fb, s, id, chance(r, 500) ? CG_R_SYNC : CG_R_EVENT);
	if (chance(r, 10))
		fake_flush(&w->fb, s, id, CG_R_TIMEOUT);
	if (chance(r, 5))  /* GPU timing feedback, sometimes slower than eager */
		cg_stream_timing(s, w->fb.last_built_key, 10.0, 8.0 + below(r, 5));
	return true;
}

static void random_config(struct cg_engine_config *cfg, struct rng *r)
{
	static const uint32_t chunk_max[] = { 1, 4, 5, 8, 16, 33, 64 };
	static const uint32_t max_graphs[] = { 0, 1, 2, 3, 8, 1000 };
	cg_engine_config_default(cfg);
	if (chance(r, 500))  /* the GPU alone: slower graph samples do disable chunks */
		cfg->launch_host_us = cfg->graph_launch_host_us = 0;
	cfg->warmup = 1 + below(r, 4);
	cfg->chunk_max = chunk_max[below(r, 7)];
	cfg->max_graphs = max_graphs[below(r, 6)];
	cfg->fail_limit = 1 + below(r, 4);
	cfg->record_only = chance(r, 60);
	cfg->measure = chance(r, 500);  /* with a clock that makes the controller flip at random */
}

/* The engine's clock in these traces: random steps, so that the deferral controller's
 * decisions (and so its mode switches mid-trace) fall anywhere. */
static struct rng *clock_rng;
static uint64_t clock_ns;

static uint64_t random_clock(void)
{
	return clock_ns += 1 + below(clock_rng, 2000000);
}

static void random_faults(struct fake_backend *fb, struct rng *r)
{
	uint32_t kind = below(r, 3);
	if (kind == 1) {
		for (int c = 0; c < FAKE_NCALLS; c++)
			fb->fail_permille[c] = below(r, 150);
	} else if (kind == 2) {
		fb->fail_nth[below(r, FAKE_NCALLS)] = 1 + below(r, 20);
	}
}

/* Cost-gate timing in half the traces: the backend takes a random share of the samples asked
 * for, and one comes back (a slower or a faster graph) at random points between calls. */
static struct {
	struct rng *r;
	bool have[2];
	uint64_t key[2];
} timing;

static bool timing_begin(void *be, void *stream, uint64_t key, bool graph)
{
	if (!chance(timing.r, 600))
		return false;
	timing.key[fake_stream_id(stream)] = key;
	timing.have[fake_stream_id(stream)] = true;
	return true;
}

static void timing_end(void *be, void *stream, bool ok)
{
}

static uint64_t decisions[2];  /* the controller's, over all traces: [0] eager, [1] graphs */

/* CG_PROPERTY_DIGEST=FILE writes one line per trace: a hash of what the engine did with it
 * (every counter, the backend's calls and events, which ops ran from a graph). Two builds of
 * the engine that give the same file behave the same on every trace: the check behind a change
 * meant to preserve behaviour. */
static FILE *digest_out;

static uint64_t digest_mix(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static void digest_trace(uint64_t seed, const struct world *w, const struct cg_stats *end)
{
	uint64_t h = digest_mix(0xcbf29ce484222325ull, end, sizeof(*end));
	long counts[] = { w->fb.graph_launches, w->fb.patches, w->fb.eager, w->fb.built,
	                  (long)w->fb.ndecisions };
	h = digest_mix(h, counts, sizeof(counts));
	h = digest_mix(h, w->fb.events, sizeof(w->fb.events));
	h = digest_mix(h, w->fb.fallback_events, sizeof(w->fb.fallback_events));
	for (size_t i = 0; i < w->fb.nlog; i++) {
		uint32_t at[2] = { w->fb.log[i].stream, w->fb.log[i].in_graph };
		h = digest_mix(h, at, sizeof(at));
	}
	fprintf(digest_out, "%llu %016llx\n", (unsigned long long)seed, (unsigned long long)h);
}

/* Runs one trace; returns ops replayed (to check the property is not vacuous). */
static uint64_t run_trace(uint64_t seed)
{
	struct world w;
	struct rng r = { seed * 0x9e3779b97f4a7c15ull + 0x1234567 };
	memset(&w, 0, sizeof(w));
	random_config(&w.cfg, &r);
	fake_backend_init(&w.fb, seed);
	random_faults(&w.fb, &r);
	memset(&timing, 0, sizeof(timing));
	timing.r = &r;
	if (chance(&r, 500)) {
		w.fb.table.time_begin = timing_begin;
		w.fb.table.time_end = timing_end;
	}
	w.e = cg_engine_new(&w.cfg, &w.fb.table, &w.fb);
	clock_rng = &r;
	clock_ns = 0;
	if (w.e)
		cg_engine_set_clock(w.e, random_clock);
	assert_non_null(w.e);
	for (uint32_t i = 0; i < 2; i++) {
		w.s[i] = cg_stream_new(w.e, fake_stream(i), i);
		assert_non_null(w.s[i]);
		make_program(&w.prog[i], &r);
		/* Some of the measured ones long enough for 16 trusted epochs and the probes after
		 * them (all of them so long would take minutes under sanitizers). */
		if (w.cfg.measure)
			w.prog[i].iters += chance(&r, 250) ? 100 + below(&r, 140) : below(&r, 60);
	}
	bool live[2] = { true, true };
	while (live[0] || live[1]) {
		uint32_t id = live[0] && live[1] ? below(&r, 2) : live[1];
		live[id] = step(&w, &r, id);
		if (timing.have[id] && chance(&r, 300)) {
			cg_stream_timing(w.s[id], timing.key[id], 10.0, chance(&r, 500) ? 9.0 : 11.0);
			timing.have[id] = false;
		}
		if (w.fb.graphs_alive > (long)w.cfg.max_graphs)
			fail_msg("seed %llu: %ld graphs alive, max %u", (unsigned long long)seed,
			         w.fb.graphs_alive, w.cfg.max_graphs);
	}
	struct cg_stats st;
	cg_engine_stats(w.e, &st);
	cg_stream_free(w.s[0], CG_R_NONE);
	cg_stream_free(w.s[1], CG_R_NONE);
	struct cg_stats end;
	cg_engine_stats(w.e, &end);
	cg_engine_free(w.e, false);

	char msg[128];
	if (!fake_backend_same(&w.fb, msg, sizeof(msg)))
		fail_msg("seed %llu: %s", (unsigned long long)seed, msg);
	if (w.fb.contract_errors || w.fb.graphs_alive)
		fail_msg("seed %llu: %ld contract errors, %ld graphs leaked", (unsigned long long)seed,
		         w.fb.contract_errors, w.fb.graphs_alive);
	/* Mid-run, every op is replayed, eager, or still pending; at the end none is pending and
	 * every eager op has its reason. */
	assert_true(st.ops >= st.ops_replayed + st.ops_eager);
	uint64_t by_reason = 0;
	for (int i = 0; i < CG_R_COUNT; i++)
		by_reason += end.fallbacks[i];
	assert_int_equal(by_reason, end.ops_eager);
	assert_int_equal(end.ops, end.ops_replayed + end.ops_eager);
	assert_int_equal(end.graph_launches, (uint64_t)w.fb.graph_launches);
	assert_int_equal(end.graphs_alive, 0);
	if (w.cfg.record_only)
		assert_int_equal(end.ops_replayed, 0);
	if (digest_out)
		digest_trace(seed, &w, &end);
	for (uint32_t i = 0; i < w.fb.ndecisions; i++)
		decisions[w.fb.decision[i].defer]++;
	fake_backend_fini(&w.fb);
	return end.ops_replayed;
}

static void test_random_traces_run_exactly_once_in_order(void **state)
{
	uint64_t replayed = 0, replaying_traces = 0;
	const char *digest = getenv("CG_PROPERTY_DIGEST");
	if (digest && *digest && !(digest_out = fopen(digest, "w")))
		fail_msg("cannot write %s", digest);
	for (uint64_t seed = 1; seed <= TRACES; seed++) {
		uint64_t n = run_trace(seed);
		replayed += n;
		replaying_traces += n > 0;
	}
	/* The traces must exercise replay, not only the eager path. */
	assert_true(replaying_traces > TRACES / 2);
	/* ... and mode switches of the deferral controller, both ways. */
	assert_true(decisions[0] > 0 && decisions[1] > 0);
	print_message("controller decisions: %llu eager, %llu graphs\n",
	              (unsigned long long)decisions[0], (unsigned long long)decisions[1]);
	print_message("%llu of %d traces replayed, %llu ops from graphs\n",
	              (unsigned long long)replaying_traces, TRACES, (unsigned long long)replayed);
	if (digest_out)
		fclose(digest_out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_traces_run_exactly_once_in_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
