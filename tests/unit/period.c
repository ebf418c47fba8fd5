/* The iteration finder behind `cugraft profile` (policy/period.h) on made-up boundary-token
 * sequences: periods 1..1000 after a prologue and before an epilogue, a pattern with a rare
 * token (not period 1), inserted and changed tokens (noise), and sequences without a period. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/period.h"

enum { ALLOC = 0x40000000u, SYNC = 0x10000000u, COPY = 0x20000000u, EVENT = 0x50000000u,
       GRAPH = 0x60000000u, CAP = 1 << 17 };

static uint32_t seq[CAP], weight[CAP];
static size_t len;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

static void push(uint32_t tok, uint32_t w)
{
	assert_true(len < CAP);
	weight[len] = w;
	seq[len++] = tok;
}

/* A token as the shim makes it: kind in the high bits, launches since the last boundary. */
static void push_boundary(uint32_t kind, uint32_t launches)
{
	push(kind | launches, launches);
}

/* A pattern of p random tokens (kinds sync/copy, 0..999 launches), repeated iters times. */
static void push_loop(const uint32_t *pattern, size_t p, size_t iters)
{
	for (size_t i = 0; i < iters; i++)
		for (size_t k = 0; k < p; k++)
			push(pattern[k], pattern[k] & 0xffffff);
}

static void make_pattern(uint32_t *pattern, size_t p)
{
	for (size_t k = 0; k < p; k++)
		pattern[k] = (next_rand() & 1 ? SYNC : COPY) | (next_rand() % 1000);
}

/* Start-up: module loads and allocations with a few launches (tokens the loop never makes). */
static void push_prologue(size_t n)
{
	for (size_t i = 0; i < n; i++)
		push_boundary(0x30000000u, 1000 + next_rand() % 50);
}

/* Teardown: frees, each a boundary with no launch before it; they repeat with any period. */
static void push_epilogue(size_t n)
{
	for (size_t i = 0; i < n; i++)
		push_boundary(ALLOC, 0);
}

static void test_periods_with_prologue_and_epilogue(void **state)
{
	(void)state;
	static uint32_t pattern[1000];
	const size_t periods[] = { 1, 2, 3, 5, 8, 13, 64, 100, 333, 630, 999, 1000 };
	for (size_t c = 0; c < sizeof(periods) / sizeof(periods[0]); c++) {
		size_t p = periods[c], iters = p > 500 ? 5 : 3000 / p + 3;
		size_t pro = next_rand() % 40, epi = next_rand() % 40;
		len = 0;
		push_prologue(pro);
		make_pattern(pattern, p);
		push_loop(pattern, p, iters);
		push_epilogue(epi);
		struct cg_period r;
		assert_true(cg_period_find(seq, weight, len, 1000, &r));
		assert_int_equal(r.period, p);
		assert_int_equal(r.iterations, iters);
		assert_int_equal(r.first, pro);
		assert_int_equal(r.tokens, iters * p);
		assert_int_equal(r.disturbances, 0);
	}
}

/* Two syncs after 5 launches and a copy after 3: one iteration of 3 tokens, although 2 of 3
 * positions also match period 1. With 9 syncs instead of 2 the copy is as rare as a logging
 * read every 10 steps, and period 1 (a micro-step) is what comes out. */
static void test_rare_token(void **state)
{
	(void)state;
	for (int syncs = 2; syncs <= 9; syncs += 7) {
		len = 0;
		push_prologue(7);
		for (int it = 0; it < 40; it++) {
			for (int k = 0; k < syncs; k++)
				push_boundary(SYNC, 5);
			push_boundary(COPY, 3);
		}
		struct cg_period r;
		assert_true(cg_period_find(seq, weight, len, 1000, &r));
		assert_int_equal(r.period, syncs == 2 ? 3 : 1);
		if (syncs == 2)
			assert_int_equal(r.iterations, 40);
	}
}

/* fourway's shape: a sync after 41 launches and a read of the result, then after the loop
 * six more reads, the same token as the loop's own read, which repeats with any period. */
static void test_epilogue_of_the_loops_own_token(void **state)
{
	(void)state;
	len = 0;
	for (int i = 0; i < 7; i++) {
		push_boundary(ALLOC, 0);
		push_boundary(SYNC, 0);  /* cuMemsetD32 */
	}
	for (int it = 0; it < 30; it++) {
		push_boundary(SYNC, 41);
		push_boundary(COPY, 0);
	}
	for (int i = 0; i < 6; i++)
		push_boundary(COPY, 0);
	struct cg_period r;
	assert_true(cg_period_find(seq, weight, len, 1000, &r));
	assert_int_equal(r.period, 2);
	assert_int_equal(r.iterations, 30);
	assert_int_equal(r.first, 14);
}

/* The C trainer's shape: ~630 launches and 8 host syncs per step; the figure the old estimate
 * (one iteration per sync) got wrong by 8x. */
static void test_trainer_with_several_syncs_per_step(void **state)
{
	(void)state;
	const uint32_t step[8][2] = { { COPY, 0 }, { SYNC, 120 }, { SYNC, 200 }, { COPY, 1 },
	                              { SYNC, 150 }, { SYNC, 100 }, { COPY, 59 }, { SYNC, 0 } };
	len = 0;
	push_prologue(25);
	for (int it = 0; it < 100; it++)
		for (int k = 0; k < 8; k++)
			push_boundary(step[k][0], step[k][1]);
	push_epilogue(30);
	struct cg_period r;
	assert_true(cg_period_find(seq, weight, len, 1000, &r));
	assert_int_equal(r.period, 8);
	assert_int_equal(r.iterations, 100);
	uint64_t launches = 0;
	assert_int_equal(r.tokens, 800);
	for (size_t i = r.first; i < r.first + r.tokens; i++)
		launches += weight[i];
	assert_int_equal(launches, 100 * 630);
}

/* An extra boundary every 10 iterations (a logging read) and a changed launch count every 25:
 * the period stays one step (not the 50 steps after which the sequence repeats exactly), and
 * the iterations are counted by their launches, not by tokens. */
static void test_noise(void **state)
{
	(void)state;
	static uint32_t pattern[200];
	const size_t periods[] = { 2, 7, 63, 200 };
	for (size_t c = 0; c < sizeof(periods) / sizeof(periods[0]); c++) {
		size_t p = periods[c], iters = 400, inserted = 0;
		len = 0;
		push_prologue(11);
		make_pattern(pattern, p);
		for (size_t it = 0; it < iters; it++) {
			for (size_t k = 0; k < p; k++) {
				uint32_t tok = pattern[k];
				if (it % 25 == 24 && k == p / 2)
					tok ^= 1;  /* one launch more or less */
				push(tok, tok & 0xffffff);
			}
			if (it % 10 == 9 && it + 1 < iters) {
				push_boundary(COPY, 2);  /* e.g. a logging copy */
				inserted++;
			}
		}
		struct cg_period r;
		assert_true(cg_period_find(seq, weight, len, 1000, &r));
		assert_int_equal(r.period, p);
		assert_true(r.disturbances > 0);
		assert_int_equal(r.iterations, iters);
		assert_int_equal(r.tokens, iters * p + inserted);
	}
}

static void test_no_period(void **state)
{
	(void)state;
	len = 0;
	for (int i = 0; i < 5000; i++)
		push(next_rand(), next_rand() % 100);
	struct cg_period r;
	assert_false(cg_period_find(seq, weight, len, 1000, &r));
	/* Too short to repeat three times. */
	assert_false(cg_period_find(seq, weight, 2, 1000, &r));
	const uint32_t two[] = { 1, 2, 3, 1, 2, 3 };
	assert_false(cg_period_find(two, NULL, 6, 1000, &r));
	const uint32_t three[] = { 1, 2, 3, 1, 2, 3, 1, 2, 3 };
	assert_true(cg_period_find(three, NULL, 9, 1000, &r));
	assert_int_equal(r.period, 3);
	assert_int_equal(r.iterations, 3);
}

/* The shim's ring holds the last 64K tokens: a long run fills it; a period of 1000 is found
 * there too (and in reasonable time: O(n * max_period)). */
static void test_full_ring(void **state)
{
	(void)state;
	static uint32_t pattern[1000];
	len = 0;
	make_pattern(pattern, 997);
	push_loop(pattern, 997, 65536 / 997);
	struct cg_period r;
	assert_true(cg_period_find(seq, weight, len, 1000, &r));
	assert_int_equal(r.period, 997);
	assert_int_equal(r.iterations, 65536 / 997);
}

/* torch.compile(mode="reduce-overhead")'s shape: the compile phase benchmarks kernels (a
 * cache-clearing fill and the kernel between two event records, a thousand times per config,
 * a sync after each: a launch-heavy period of 1), warms up eagerly, captures; then each step replays its graph (the
 * token carries the graph's 120 kernels and 3 launches before it) and reads the loss (a kernel,
 * a copy, a sync); a short evaluation (20 steps of another graph) and frees follow. Within the
 * sequence the benchmarks carry more launches than the training loop; the loop is still the
 * iteration, and the evaluation after it, lighter, is not. */
static void test_graphed_loop_after_a_launch_heavy_compile_phase(void **state)
{
	(void)state;
	len = 0;
	push_prologue(30);
	for (int config = 0; config < 30; config++) {
		for (int rep = 0; rep < 1000; rep++)
			push_boundary(EVENT, 1);
		push_boundary(SYNC, 0);  /* one config measured */
	}
	for (int i = 0; i < 12; i++)  /* eager warm-up */
		push_boundary(0x30000000u, 40 + (uint32_t)i);
	for (int i = 0; i < 6; i++)  /* the capture */
		push_boundary(0x30000000u, 200 + (uint32_t)i);
	const size_t loop_first = len;
	for (int step = 0; step < 190; step++) {
		push_boundary(GRAPH, 123);
		push_boundary(COPY, 1);
		push_boundary(SYNC, 0);
	}
	const size_t loop_end = len;
	for (int step = 0; step < 20; step++) {
		push_boundary(GRAPH, 41);
		push_boundary(COPY, 1);
	}
	push_epilogue(30);
	uint64_t compile = 0, loop = 0;
	for (size_t i = 0; i < loop_first; i++)
		compile += weight[i];
	for (size_t i = loop_first; i < loop_end; i++)
		loop += weight[i];
	assert_true(compile > loop);  /* the shape this test is about */
	struct cg_period r;
	assert_true(cg_period_find(seq, weight, len, 1000, &r));
	assert_int_equal(r.period, 3);
	assert_int_equal(r.first, loop_first);
	assert_int_equal(r.tokens, loop_end - loop_first);
	assert_int_equal(r.iterations, 190);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_periods_with_prologue_and_epilogue),
		cmocka_unit_test(test_rare_token),
		cmocka_unit_test(test_epilogue_of_the_loops_own_token),
		cmocka_unit_test(test_trainer_with_several_syncs_per_step),
		cmocka_unit_test(test_noise),
		cmocka_unit_test(test_no_period),
		cmocka_unit_test(test_full_ring),
		cmocka_unit_test(test_graphed_loop_after_a_launch_heavy_compile_phase),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
