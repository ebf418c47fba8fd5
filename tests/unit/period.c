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
       GRAPH = 0x60000000u, CAP = 1 << 18 };

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
 * read every 10 steps, but it carries 3 launches: structure, not noise, so the iteration is
 * still the 10 tokens. */
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
		assert_int_equal(r.period, (size_t)syncs + 1);
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
 * the inserted tokens lengthen iterations, they add none. */
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
				if (it % 25 == 24 && it + 1 < iters && k == p / 2)
					tok ^= 1;  /* one launch more or less */
				push(tok, tok & 0xffffff);
			}
			if (it % 10 == 9 && it + 1 < iters) {
				push_boundary(COPY, 2);  /* e.g. a logging copy */
				inserted++;
			}
		}
		push_epilogue(5);
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

/* ---- Program traces: what the shim sees, call by call -------------------------------------
 * The shapes of four common loops, written as the program's launches (a kernel id each) and
 * boundaries, then given to the finder as floor.c gives them (feed). Each must come out as
 * the program's step: its launches within 5% of the count by hand, 3 iterations at least. */
enum { B_SYNC = 1, B_COPY, B_EVENT, B_ALLOC };
struct act {
	uint32_t kernel;  /* 0: a boundary of kind `boundary` */
	uint32_t boundary;
};
static struct act trace[CAP];
static size_t acts;

static void launch(uint32_t kernel)
{
	assert_true(acts < CAP);
	trace[acts++] = (struct act){ kernel, 0 };
}

/* n launches of kernels first, first + 1, ... */
static void launch_run(uint32_t first, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		launch(first + k);
}

static void boundary(uint32_t kind)
{
	assert_true(acts < CAP);
	trace[acts++] = (struct act){ 0, kind };
}

/* The finder's input as the shim makes it: an event per launch (its kernel) and per boundary
 * (its kind), runs of one event folded (cg_period_runs). */
static void feed(void)
{
	len = 0;
	for (size_t i = 0; i < acts; i++) {
		if (trace[i].kernel)
			push(0x01000000u | trace[i].kernel, 1);
		else
			push(0x80000000u | trace[i].boundary, 0);
	}
	len = cg_period_runs(seq, weight, len, NULL);
}

/* The step found has `launches` launches (within 5%) and repeats 3 times at least. */
static void expect_step(uint32_t launches)
{
	feed();
	struct cg_period r;
	assert_true(cg_period_find(seq, weight, len, 1000, &r));
	assert_true(r.iterations >= 3);
	uint64_t in = 0;
	for (size_t i = r.first; i < r.first + r.tokens; i++)
		in += weight[i];
	double per = (double)in / (double)r.iterations;
	print_message("step: %zu events, %zu iterations, %.1f launches (by hand %u)\n", r.period,
	              r.iterations, per, launches);
	assert_true(per >= 0.95 * launches && per <= 1.05 * launches);
}

/* Start-up: parameters initialised, buffers allocated. */
static void model_init(void)
{
	for (uint32_t k = 0; k < 30; k++) {
		boundary(B_ALLOC);
		launch(900 + k % 7);
	}
}

/* (a) PyTorch, a small transformer trained with loss.item() every step: 310 launches, the
 * forward's 50 without a boundary, then per parameter (50 of them, weights and biases in turn)
 * 5 launches of its gradient with 4 event records among them, 10 of the optimizer, and the
 * loss read (a copy, a sync). Per parameter the boundaries and launches repeat: 4 tokens of 5
 * launches, the shape that passed for the iteration, 50 times shorter than the step. */
static void torch_step(bool sync)
{
	launch_run(10, 2);                        /* embeddings */
	for (int layer = 0; layer < 4; layer++)
		launch_run(20, 11);
	launch_run(40, 4);                        /* head and loss */
	for (int param = 0; param < 50; param++) {
		uint32_t k = param % 2 ? 100 : 110;   /* a weight's kernels, a bias's */
		launch(k);
		launch(k + 1);
		boundary(B_EVENT);
		launch(k + 2);
		boundary(B_EVENT);
		launch(k + 3);
		boundary(B_EVENT);
		launch(k + 4);
		boundary(B_EVENT);
	}
	launch_run(200, 10);                      /* AdamW, foreach */
	if (sync) {
		boundary(B_COPY);
		boundary(B_SYNC);
	}
}

static void test_torch_item_loop(void **state)
{
	(void)state;
	acts = 0;
	model_init();
	for (int step = 0; step < 120; step++)
		torch_step(true);
	for (int i = 0; i < 20; i++)
		boundary(B_ALLOC);
	expect_step(310);
}

/* (b) The same loop without a read inside (--sync-every 0): no boundary per step at all, the
 * losses read one by one after the loop; and a loop that reads its loss every 50 steps. The
 * step is the period of the launches themselves. */
static void test_torch_loop_without_syncs(void **state)
{
	(void)state;
	for (int every = 0; every <= 50; every += 50) {
		acts = 0;
		model_init();
		for (int step = 0; step < 200; step++) {
			torch_step(false);
			if (every && step % every == every - 1) {
				boundary(B_COPY);
				boundary(B_SYNC);
			}
		}
		boundary(B_SYNC);
		for (int step = 0; step < 200 && !every; step++) {
			boundary(B_COPY);
			boundary(B_SYNC);
		}
		expect_step(310);
	}
}

/* (c) Decoding: a prompt's prefill, then per token the embedding, `layers` layers of `per`
 * launches, the final norm, the head and the argmax, and the token read (.item()); the KV cache
 * grows by an allocation every 64 tokens. Each token launches the same kernels on a longer
 * context. Small (4 layers of 8: 37 launches) and deep (12 layers of 4: 53). */
static void test_decode_loop(void **state)
{
	(void)state;
	const uint32_t shapes[2][2] = { { 4, 8 }, { 12, 4 } };
	for (int c = 0; c < 2; c++) {
		uint32_t layers = shapes[c][0], per = shapes[c][1];
		acts = 0;
		model_init();
		for (int rep = 0; rep < 2; rep++) {       /* the prefill */
			launch(400);
			for (uint32_t l = 0; l < layers; l++)
				launch_run(401, per);
			launch_run(410, 4);
			boundary(B_COPY);
			boundary(B_SYNC);
		}
		for (int token = 0; token < 200; token++) {
			if (token % 64 == 63)
				boundary(B_ALLOC);
			launch(400);
			for (uint32_t l = 0; l < layers; l++)
				launch_run(401, per);
			launch_run(410, 4);
			boundary(B_COPY);
			boundary(B_SYNC);
		}
		expect_step(1 + layers * per + 4);
	}
}

/* (d) A C trainer of GPT-2 (llm.c's shape): per step the batch's inputs and targets uploaded
 * (two copies), the forward (297 launches: 12 layers of 24 and 9 more) and the loss read, the
 * gradients zeroed by a synchronous memset, the backward and the update (333), a device sync:
 * 630 launches, 5 boundaries that wait, each after another launch count. Every 20 steps and
 * after the last one a validation of 10 batches runs the forward alone (297 launches). */
static void gpt2_forward(void)
{
	boundary(B_COPY);
	boundary(B_COPY);
	launch_run(500, 5);
	for (int layer = 0; layer < 12; layer++)
		launch_run(510, 24);
	launch_run(540, 4);
}

static void test_c_trainer_with_five_syncs(void **state)
{
	(void)state;
	for (int val = 0; val <= 1; val++) {
		acts = 0;
		model_init();
		for (int step = 0; step <= 100; step++) {
			if (val && step % 20 == 0) {
				for (int batch = 0; batch < 10; batch++) {
					gpt2_forward();
					boundary(B_COPY);
				}
			}
			if (step == 100)
				break;
			gpt2_forward();
			boundary(B_COPY);   /* the loss */
			boundary(B_SYNC);   /* cudaMemset of the gradients */
			for (int layer = 0; layer < 12; layer++)
				launch_run(600, 26);
			launch_run(640, 21);
			boundary(B_SYNC);
		}
		expect_step(630);
	}
}

/* Decoding whose attention kernel changes with the context's length (another kernel from the
 * 128th token on, then another from the 256th): a changed step, not the end of the loop. */
static void test_decode_kernel_changes_with_context(void **state)
{
	(void)state;
	acts = 0;
	model_init();
	for (int token = 0; token < 400; token++) {
		launch(400);
		for (int l = 0; l < 4; l++) {
			launch_run(401, 3);
			launch(token < 128 ? 404 : token < 256 ? 454 : 464);  /* attention */
			launch_run(405, 4);
		}
		launch_run(410, 4);
		boundary(B_COPY);
		boundary(B_SYNC);
	}
	expect_step(37);
}

/* Boundaries a timing decides (an event record, a copy), one at a random place in 3 steps of
 * 10: boundaries alone are noise at any rate, and the steps between are one loop. */
static void test_boundaries_a_timing_decides(void **state)
{
	(void)state;
	acts = 0;
	model_init();
	for (int step = 0; step < 300; step++) {
		size_t start = acts;
		torch_step(true);
		if (next_rand() % 10 < 3) {  /* one more boundary, somewhere in the step */
			size_t at = start + next_rand() % (acts - start);
			memmove(&trace[at + 1], &trace[at], (acts - at) * sizeof(*trace));
			trace[at] = (struct act){ 0, next_rand() % 2 ? B_EVENT : B_COPY };
			acts++;
		}
	}
	expect_step(310);
}

/* Deeper decoding: 32 layers of 10 launches per token. Each layer repeats 32 times in a row,
 * but the head's 5 launches break them every token: structure, so the step is the token. */
static void test_decode_many_layers(void **state)
{
	(void)state;
	acts = 0;
	model_init();
	for (int token = 0; token < 100; token++) {
		launch(400);
		for (int l = 0; l < 32; l++)
			launch_run(401, 10);
		launch_run(420, 4);
		boundary(B_COPY);
		boundary(B_SYNC);
	}
	expect_step(1 + 320 + 4);
}

/* Noise that launches: a training step of 630 launches with a gradient-norm check of 5 launches
 * and a read every 10 steps (a 126th of a step: noise), and a checkpoint of 60 launches once
 * (a break cut out of the stretch, not a reason to lose the step). */
static void test_noise_that_launches(void **state)
{
	(void)state;
	acts = 0;
	model_init();
	for (int step = 0; step < 150; step++) {
		for (int part = 0; part < 6; part++)
			launch_run(1000 + 100 * (uint32_t)part, 105);
		if (step % 10 == 9) {
			launch_run(5000, 5);
			boundary(B_COPY);
			boundary(B_SYNC);
		}
		if (step == 70)
			launch_run(6000, 60);
	}
	expect_step(630);
}

/* A step of two halves that differ in more than noise (2 launches or a 16th of 60: 3): 60
 * launches and a read, where every other iteration 4 or 8 of the launches are other kernels,
 * together (a block of its own) or spread out (another variant of some of its layers). Each
 * half alone leaves those launches unexplained every other iteration: the step is both. */
static void test_halves_that_differ_in_more_than_noise(void **state)
{
	(void)state;
	for (int c = 0; c < 4; c++) {
		uint32_t differ = c < 2 ? 4 : 8, every = 60 / differ;
		bool spread = c % 2;
		acts = 0;
		model_init();
		for (int it = 0; it < 200; it++) {
			for (uint32_t k = 0; k < 60; k++) {
				bool other = it % 2 && (spread ? k % every == 3 && k / every < differ
				                               : k >= 20 && k < 20 + differ);
				launch((other ? 2000 : 1000) + k);
			}
			boundary(B_COPY);
			boundary(B_SYNC);
		}
		expect_step(120);
	}
}

/* (e) bench/decode_torch.py's greedy decoding, no KV cache: per token the embedding and the
 * positions added, 3 layers of 18 launches, the final norm, the head, the argmax, the token
 * read (.item(): a copy, a sync), then the token written into the input (`ids[0, n].fill_`).
 * That int64's address is 16-byte aligned every other token, and PyTorch fills an aligned one
 * with its vectorised kernel, another one with its unrolled kernel: one kernel in 60 that
 * alternates, a variant of the token, not a step of two tokens. With the whole sequence as
 * context (growing) the shapes change too: a memset whose size is part of its key changes
 * every 8 tokens, cuBLAS picks another kernel for the projection's GEMM over two ranges of
 * lengths, and the softmax is another kernel from the 256th position on. */
enum { K_LN = 420, K_QKV, K_COPY, K_BMM, K_DIV, K_MASK, K_SOFTMAX, K_ADD, K_PROJ, K_FC, K_GELU,
       K_OUT, K_HEAD, K_ARGMAX, K_EMBED, K_PROJ_OTHER = 450, K_SOFTMAX_LONG, K_MEMSET = 800 };

static void decode_layer(uint32_t proj, uint32_t softmax)
{
	launch(K_LN);
	launch(K_QKV);
	launch(K_COPY);           /* q and k made contiguous */
	launch(K_COPY);
	launch(K_BMM);            /* q @ k^T */
	launch(K_DIV);
	launch(K_MASK);
	launch(softmax);
	launch(K_COPY);           /* v */
	launch(K_BMM);            /* att @ v */
	launch(K_COPY);           /* heads back together */
	launch(proj);
	launch(K_ADD);
	launch(K_LN);
	launch(K_FC);
	launch(K_GELU);
	launch(K_OUT);
	launch(K_ADD);
}

static void decode_token(int token, bool growing)
{
	uint32_t length = 128 + (uint32_t)token;  /* the prompt's 128 tokens and those made */
	bool other = growing && ((length >= 170 && length < 210) || (length >= 300 && length < 340));
	bool long_softmax = growing && length >= 256;
	if (growing)
		launch(K_MEMSET + length / 8);
	launch(K_EMBED);
	launch(K_ADD);             /* positions */
	for (int l = 0; l < 3; l++)
		decode_layer(other ? K_PROJ_OTHER : K_PROJ, long_softmax ? K_SOFTMAX_LONG : K_SOFTMAX);
	launch(K_LN);
	launch(K_HEAD);
	launch(K_ARGMAX);
	boundary(B_COPY);
	boundary(B_SYNC);
	launch(token % 2 ? 700 : 701);  /* the fill, aligned every other token */
}

static void test_decode_with_a_kernel_picked_by_alignment(void **state)
{
	(void)state;
	for (int growing = 0; growing <= 1; growing++) {
		acts = 0;
		model_init();
		boundary(B_COPY);  /* the prompt */
		for (int token = 0; token < 300; token++)
			decode_token(token, growing);
		boundary(B_SYNC);
		expect_step(2 + 3 * 18 + 3 + 1 + (uint32_t)growing);
	}
}

/* Runs of one event fold into one: 1000 launches of a kernel and a sync are 2 events. */
static void test_runs(void **state)
{
	(void)state;
	uint32_t t[] = { 7, 7, 7, 9, 7, 5, 5 }, w[] = { 1, 1, 1, 0, 1, 2, 3 }, start[7];
	size_t n = cg_period_runs(t, w, 7, start);
	assert_int_equal(n, 4);
	assert_int_not_equal(t[0], 7);  /* a run of 3 is another event than one 7 */
	assert_int_equal(w[0], 3);
	assert_int_equal(t[1], 9);
	assert_int_equal(t[2], 7);
	assert_int_equal(w[3], 5);
	assert_int_equal(start[1], 3);
	assert_int_equal(start[3], 5);
	acts = 0;
	for (int it = 0; it < 20; it++) {
		for (int k = 0; k < 1000; k++)
			launch(3);
		boundary(B_SYNC);
	}
	expect_step(1000);
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
		cmocka_unit_test(test_torch_item_loop),
		cmocka_unit_test(test_torch_loop_without_syncs),
		cmocka_unit_test(test_decode_loop),
		cmocka_unit_test(test_c_trainer_with_five_syncs),
		cmocka_unit_test(test_decode_kernel_changes_with_context),
		cmocka_unit_test(test_boundaries_a_timing_decides),
		cmocka_unit_test(test_decode_many_layers),
		cmocka_unit_test(test_noise_that_launches),
		cmocka_unit_test(test_halves_that_differ_in_more_than_noise),
		cmocka_unit_test(test_decode_with_a_kernel_picked_by_alignment),
		cmocka_unit_test(test_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
