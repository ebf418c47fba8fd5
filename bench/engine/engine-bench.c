/* engine-bench: ns per op of the policy engine's hot paths on this CPU, with a backend that does
 * nothing. A 300-op loop (96-byte signatures, 64-byte arguments, one scalar changing every step)
 * with a sync at the end of each iteration, timed on the learning path (chunks never reach
 * warmup) and on the replay path (matching, deferral, patching one node, launching); and on the
 * replay path with a size in every op's arguments changing every step, as every kernel's shape
 * does in a decode over a growing context (every node patched).
 *
 *   engine-bench                   time the paths over millions of ops
 *   engine-bench --callgrind PATH  a few iterations of PATH (learn|replay|grow) in bench_loop(),
 *       valgrind --tool=callgrind --toggle-collect=bench_loop engine-bench --callgrind replay
 *   (instructions per op = Ir of bench_loop / the ops printed) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "policy/engine.h"

#define LOOP 300
#define SIG_LEN 96
#define ARGS_LEN 64

static unsigned char sigs[LOOP][SIG_LEN], args[LOOP][ARGS_LEN];
static int graph_token;
static bool growing; /* every op's third argument word changes every step */

static int null_eager(void *be, void *stream, const struct cg_op *op, const char **detail)
{
	return 0;
}

static int null_build(void *be, void *stream, const struct cg_op *ops, uint32_t n, bool share,
                      void **graph, const char **detail)
{
	*graph = &graph_token;
	return 0;
}

static int null_patch(void *be, void *graph, uint32_t index, const struct cg_op *op, const char **detail)
{
	return 0;
}

static int null_launch(void *be, void *stream, void *graph, const char **detail)
{
	return 0;
}

static void null_destroy(void *be, void *graph)
{
}

static const struct cg_backend null_backend = {
	.eager = null_eager, .build = null_build, .patch = null_patch, .launch = null_launch,
	.destroy = null_destroy,
};

static void make_loop(void)
{
	for (uint32_t p = 0; p < LOOP; p++) {
		uint64_t sig[SIG_LEN / 8] = { 0x7f0000001000ull + p * 64, 128, 1, 1, 256, 1, 1, 0,
		                              0x0808080808ull, p % 7, 0, 0 };
		uint64_t arg[ARGS_LEN / 8] = { 0x7000000ull + p * 4096, 0x7100000ull + p * 4096, 1024,
		                               1, 0, 0, 0, 0 };
		memcpy(sigs[p], sig, sizeof(sig));
		memcpy(args[p], arg, sizeof(arg));
	}
}

/* `iters` iterations, as the shim would drive the engine. */
static inline uint64_t drive(struct cg_stream *s, uint64_t first, uint64_t iters)
{
	uint64_t passed = 0;
	for (uint64_t it = first; it < first + iters; it++) {
		memcpy(args[7] + 24, &it, sizeof(it));  /* an RNG offset: by value, every step */
		for (uint32_t p = 0; growing && p < LOOP; p++)
			memcpy(args[p] + 16, &it, sizeof(it));  /* the sequence's length */
		for (uint32_t p = 0; p < LOOP; p++) {
			struct cg_op op = { .sig = sigs[p], .args = args[p], .sig_len = SIG_LEN,
			                    .args_len = ARGS_LEN };
			passed += cg_submit(s, &op) == CG_PASS;
		}
		cg_boundary(s, CG_R_SYNC);
	}
	return passed;
}

/* Learn (and arm) every chunk; kept out of bench_loop so that callgrind counts only the rest. */
__attribute__((noinline)) static void warm_up(struct cg_stream *s)
{
	drive(s, 0, 10);
}

/* The measured part. */
__attribute__((noinline)) uint64_t bench_loop(struct cg_stream *s, uint64_t iters);
__attribute__((noinline)) uint64_t bench_loop(struct cg_stream *s, uint64_t iters)
{
	return drive(s, 10, iters);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Returns ns per op; `replay` selects the path, checked through the engine's statistics.
 * `measure`: with the deferral controller counting ops (on the null backend its decisions mean
 * nothing, so the replay path is timed without it). */
static double run(bool replay, bool grow, bool measure, uint64_t iters, bool quiet)
{
	growing = grow;
	struct cg_engine_config cfg;
	cg_engine_config_default(&cfg);
	cfg.warmup = replay ? 3 : UINT32_MAX;
	cfg.measure = measure;
	struct cg_engine *e = cg_engine_new(&cfg, &null_backend, NULL);
	struct cg_stream *s = e ? cg_stream_new(e, NULL, 0) : NULL;
	if (!s) {
		fprintf(stderr, "engine-bench: out of memory\n");
		exit(1);
	}
	warm_up(s);
	struct cg_stats before, after;
	cg_engine_stats(e, &before);
	double t0 = now_s();
	bench_loop(s, iters);
	double t1 = now_s();
	cg_engine_stats(e, &after);
	uint64_t ops = after.ops - before.ops, replayed = after.ops_replayed - before.ops_replayed;
	if (replay ? replayed != ops : replayed != 0) {
		fprintf(stderr, "engine-bench: %s path not taken (%llu of %llu replayed)\n",
		        replay ? "replay" : "learning", (unsigned long long)replayed,
		        (unsigned long long)ops);
		exit(1);
	}
	if (!quiet)
		printf("%-8s %-11s %10llu ops  %6.1f ns/op  (%llu graph launches, %llu patches)\n",
		       !replay ? "learning" : grow ? "growing" : "replay", measure ? "(measuring)" : "",
		       (unsigned long long)ops, (t1 - t0) * 1e9 / ops,
		       (unsigned long long)(after.graph_launches - before.graph_launches),
		       (unsigned long long)(after.patches - before.patches));
	else
		printf("%s: %llu ops in bench_loop\n", !replay ? "learning" : grow ? "growing" : "replay",
		       (unsigned long long)ops);
	cg_stream_free(s, CG_R_EXIT);
	cg_engine_free(e, false);
	return (t1 - t0) * 1e9 / ops;
}

int main(int argc, char **argv)
{
	make_loop();
	if (argc == 3 && strcmp(argv[1], "--callgrind") == 0) {
		bool grow = strcmp(argv[2], "grow") == 0;
		run(grow || strcmp(argv[2], "replay") == 0, grow, false, 200, true);
		return 0;
	}
	if (argc != 1) {
		fprintf(stderr, "usage: engine-bench [--callgrind learn|replay|grow]\n");
		return 2;
	}
	run(false, false, false, 20000, false);
	run(false, false, true, 20000, false);
	run(true, false, false, 20000, false);
	run(true, true, false, 20000, false);
	return 0;
}
