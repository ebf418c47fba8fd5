/* Named scenarios of the policy engine against the recording fake backend: each drives a
 * program-like op sequence and checks both what ran (exactly the submitted ops, in order, with
 * their bytes) and how it ran (replayed, patched, eager and why). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "fake_backend.h"
#include "policy/assert.h"
#include "policy/engine.h"

#define LOOP 300  /* ops per iteration of the model training step */

struct rig {
	struct fake_backend fb;
	struct cg_engine *e;
	struct cg_stream *s[2];
};

static unsigned char sig_buf[96], args_buf[64];

/* A kernel launch as the shim would pack it: 96 signature bytes (function, launch attributes,
 * ..., `shape` standing for what a node update cannot change, such as another kernel picked for
 * another size), 64 argument bytes (a pointer, a scalar, constants; the shim's launch shape is
 * argument bytes like these). */
static struct cg_op mkop(uint32_t kernel, uint32_t shape, uint64_t ptr, uint64_t scalar)
{
	uint64_t sig[12] = { 0x7f0000001000ull + kernel, shape, 128, 1, 1, 256, 1, 1, 0, kernel * 7u };
	uint64_t args[8] = { ptr, scalar, kernel, 3, 4, 5, 6, 7 };
	memcpy(sig_buf, sig, sizeof(sig));
	memcpy(args_buf, args, sizeof(args));
	return (struct cg_op){ .sig = sig_buf, .args = args_buf, .sig_len = 96, .args_len = 64 };
}

/* The host's pace: a paced rig's engine reads a clock that the scenario's loops advance by
 * sim_pace ns before each op they submit. */
static uint64_t sim_now, sim_pace;

static uint64_t sim_clock(void)
{
	return sim_now;
}

static void submit_paced(struct rig *r, int sid, const struct cg_op *op)
{
	sim_now += sim_pace;
	fake_submit(&r->fb, r->s[sid], (uint32_t)sid, op);
}

static void rig_up(struct rig *r, const struct cg_engine_config *cfg, int streams)
{
	sim_pace = 0;
	memset(r, 0, sizeof(*r));
	fake_backend_init(&r->fb, 1);
	r->e = cg_engine_new(cfg, &r->fb.table, &r->fb);
	assert_non_null(r->e);
	for (int i = 0; i < streams; i++) {
		r->s[i] = cg_stream_new(r->e, fake_stream(i), (uint64_t)i);
		assert_non_null(r->s[i]);
	}
}

static const struct cg_engine_config *config(uint32_t warmup, uint32_t chunk_max)
{
	static struct cg_engine_config cfg;
	cg_engine_config_default(&cfg);
	cfg.warmup = warmup;
	cfg.chunk_max = chunk_max;
	cfg.measure = false;  /* these scenarios count what the policy does; the controller decides
	                         from wall time and has its own tests (policy_control) */
	return &cfg;
}

/* The engine's clock from now on: the host submits an op every `ns_per_op` ns. */
static void rig_paced(struct rig *r, uint64_t ns_per_op)
{
	sim_now = 1000000;
	sim_pace = ns_per_op;
	cg_engine_set_clock(r->e, sim_clock);
}

static struct cg_stats stats(const struct rig *r)
{
	struct cg_stats st;
	cg_engine_stats(r->e, &st);
	return st;
}

/* Frees everything and checks what must hold in every scenario. */
static void rig_down(struct rig *r)
{
	char msg[128] = "";
	for (int i = 0; i < 2; i++)
		cg_stream_free(r->s[i], CG_R_NONE);
	struct cg_stats st = stats(r);
	assert_int_equal(st.ops, st.ops_replayed + st.ops_eager);
	uint64_t by_reason = 0;
	for (int i = 0; i < CG_R_COUNT; i++)
		by_reason += st.fallbacks[i];
	assert_int_equal(by_reason, st.ops_eager);
	assert_int_equal(st.graph_launches, (uint64_t)r->fb.graph_launches);
	assert_int_equal(st.graphs_alive, 0);
	cg_engine_free(r->e, false);
	if (!fake_backend_same(&r->fb, msg, sizeof(msg)))
		fail_msg("executed sequence differs from the submitted one: %s", msg);
	assert_int_equal(r->fb.contract_errors, 0);
	assert_int_equal(r->fb.graphs_alive, 0);
	fake_backend_fini(&r->fb);
}

/* One iteration of `len` of the loop's kernels on stream `sid`, ending at a boundary of kind
 * `why`. */
static void iteration_of(struct rig *r, int sid, uint32_t len, enum cg_reason why)
{
	for (uint32_t p = 0; p < len; p++) {
		struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
		submit_paced(r, sid, &op);
	}
	fake_boundary(&r->fb, r->s[sid], (uint32_t)sid, why);
}

/* One iteration of the model loop, its LOOP distinct kernels, ending at a boundary of kind
 * `why`. */
static void iteration_to(struct rig *r, int sid, enum cg_reason why)
{
	iteration_of(r, sid, LOOP, why);
}

/* ... and at a sync. */
static void iteration(struct rig *r, int sid, uint64_t step)
{
	iteration_to(r, sid, CG_R_SYNC);
}

static void test_steady_loop_replays(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 20; it++)
		iteration(&r, 0, (uint64_t)it);
	struct cg_stats st = stats(&r);
	/* Two learning iterations, then every op of every iteration inside a graph: the third
	 * runs as the graphs it earns. */
	assert_int_equal(st.ops_replayed, 18 * LOOP);
	assert_int_equal(st.fallbacks[CG_R_LEARNING], 2 * LOOP);
	assert_true(st.graph_launches >= 18 * (LOOP / 64 + 1));
	assert_int_equal(st.patches, 0);
	assert_int_equal(st.fallbacks[CG_R_DIVERGENCE], 0);
	rig_down(&r);
}

/* A launch the caller runs itself after a boundary (a shape the driver has not accepted yet: the
 * first iteration's first kernel) starts the chunk being learned, as the same launch does once
 * its shape is proven: the first iteration's chunks are the next ones', so the second iteration
 * already runs as their graphs, the first chunk included. */
static void test_passed_launch_starts_its_chunk(void **state)
{
	for (int with_event = 0; with_event < 2; with_event++) {
		struct rig r;
		rig_up(&r, config(2, 64), 1);
		for (uint32_t it = 0; it < 4; it++) {
			uint64_t before = stats(&r).ops_replayed;
			for (uint32_t p = 0; p < LOOP; p++) {
				struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
				if (it == 0 && p == 0)
					fake_pass(&r.fb, r.s[0], 0, &op);
				else
					fake_submit(&r.fb, r.s[0], 0, &op);
				if (with_event && p == 10)  /* a boundary soon after it, every iteration */
					fake_boundary(&r.fb, r.s[0], 0, CG_R_EVENT);
			}
			fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
			assert_int_equal(stats(&r).ops_replayed - before, it == 0 ? 0 : LOOP);
		}
		/* the pass is the caller's to count: the engine's eager ops are the rest of the first */
		assert_int_equal(stats(&r).ops_eager, LOOP - 1);
		rig_down(&r);
	}
}

/* A stream is settled (the shim may skip the engine for a boundary) only where a boundary
 * would change nothing: right after another boundary with no op since, and never while work is
 * deferred. */
static void test_settled_only_between_boundaries(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	assert_true(cg_stream_settled(r.s[0]));  /* a new stream: nothing to cut */
	for (int it = 0; it < 6; it++) {
		for (uint32_t p = 0; p < LOOP; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
			fake_submit(&r.fb, r.s[0], 0, &op);
			assert_false(cg_stream_settled(r.s[0]));
		}
		/* An event record right after the last chunk: the chunk is still to be marked as
		 * waited for by the sync that follows (EXPOSED), so not settled while replaying. */
		fake_boundary(&r.fb, r.s[0], 0, CG_R_EVENT);
		if (it >= 4)
			assert_false(cg_stream_settled(r.s[0]));
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
		assert_true(cg_stream_settled(r.s[0]));
		fake_boundary(&r.fb, r.s[0], 0, CG_R_EVENT);
		assert_true(cg_stream_settled(r.s[0]));
	}
	/* Mid-iteration, deferred work pending: not settled, whatever the flusher does. */
	struct cg_op op = mkop(0, 1, 0x7000000, 1);
	assert_int_equal(fake_submit(&r.fb, r.s[0], 0, &op), CG_TAKEN);
	assert_false(cg_stream_settled(r.s[0]));
	fake_flush(&r.fb, r.s[0], 0, CG_R_TIMEOUT);
	assert_false(cg_stream_settled(r.s[0]));
	fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
	assert_true(cg_stream_settled(r.s[0]));
	rig_down(&r);
}

/* cg_stream_calm says the same, and which boundaries would still change something: a stream
 * whose chunk was launched at its last boundary is QUIET (only a wait would mark the chunk), and
 * a boundary that is not a wait, given to it or not, changes nothing that follows. Two engines
 * see the same program, one of them with event records and queries added wherever its stream
 * is QUIET or SETTLED (what the shim forwards without the engine): the same ops run, in the same
 * graphs, with the same patches. The loop repeats one block three times between its boundaries
 * (instances by position), with a pointer that moves every step. */
static void run_block_loop(struct rig *r, bool extra)
{
	for (int it = 0; it < 12; it++) {
		for (int rep = 0; rep < 3; rep++) {
			for (uint32_t p = 0; p < 40; p++) {
				struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000 + (uint64_t)it * 64, rep);
				fake_submit(&r->fb, r->s[0], 0, &op);
				assert_int_equal(cg_stream_calm(r->s[0]), CG_BUSY);
			}
			fake_boundary(&r->fb, r->s[0], 0, CG_R_EVENT);
			assert_int_not_equal(cg_stream_calm(r->s[0]), CG_BUSY);
			for (int k = 0; extra && k < 2; k++)
				fake_boundary(&r->fb, r->s[0], 0, k ? CG_R_QUERY : CG_R_EVENT);
		}
		if (it >= 6)  /* replaying: the last chunk ran from its graph, still to be marked */
			assert_int_equal(cg_stream_calm(r->s[0]), CG_QUIET);
		fake_boundary(&r->fb, r->s[0], 0, CG_R_SYNC);
		assert_int_equal(cg_stream_calm(r->s[0]), CG_SETTLED);
		if (extra)
			fake_boundary(&r->fb, r->s[0], 0, CG_R_EVENT);
	}
}

static void test_boundaries_that_do_not_wait_change_nothing_on_a_quiet_stream(void **state)
{
	struct rig a, b;
	rig_up(&a, config(3, 64), 1);
	run_block_loop(&a, false);
	rig_up(&b, config(3, 64), 1);
	run_block_loop(&b, true);
	struct cg_stats sa = stats(&a), sb = stats(&b);
	assert_true(sa.graph_launches > 0);
	assert_int_equal(sa.ops_replayed, sb.ops_replayed);
	assert_int_equal(sa.graph_launches, sb.graph_launches);
	assert_int_equal(sa.patches, sb.patches);
	assert_int_equal(sa.graphs_built, sb.graphs_built);
	assert_int_equal(a.fb.nlog, b.fb.nlog);
	for (size_t i = 0; i < a.fb.nlog; i++)
		assert_int_equal(a.fb.log[i].in_graph, b.fb.log[i].in_graph);
	for (int r = 0; r < CG_R_COUNT; r++)
		assert_int_equal(sa.fallbacks[r], sb.fallbacks[r]);
	rig_down(&a);
	rig_down(&b);
}

static void test_pointer_drift_patches_only(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	uint64_t built = 0;
	for (int it = 0; it < 20; it++) {
		/* The caching allocator hands out other addresses every step for a third of them. */
		for (uint32_t p = 0; p < LOOP; p++) {
			uint64_t ptr = 0x7000000 + p * 0x1000 + (p % 3 == 0 ? (uint64_t)it * 0x100000 : 0);
			struct cg_op op = mkop(p, 1, ptr, 1);
			fake_submit(&r.fb, r.s[0], 0, &op);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
		if (it == 3)
			built = stats(&r).graphs_built;
	}
	struct cg_stats st = stats(&r);
	assert_int_equal(st.ops_replayed, 18 * LOOP);
	/* (the third iteration's graphs are built from its own arguments) */
	assert_int_equal(st.patches, 17 * (LOOP / 3));
	assert_int_equal(st.graphs_built, built);  /* no re-learning, no rebuild */
	assert_int_equal(st.chunks_learned, built);
	assert_true(st.arg_words_changing >= LOOP / 3);
	rig_down(&r);
}

static void test_scalar_every_step_patched(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 20; it++) {
		for (uint32_t p = 0; p < LOOP; p++) {
			/* Op 7 takes the step (an RNG offset): by value, different every launch. */
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, p == 7 ? (uint64_t)it : 1);
			fake_submit(&r.fb, r.s[0], 0, &op);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
	}
	struct cg_stats st = stats(&r);
	assert_int_equal(st.ops_replayed, 18 * LOOP);
	assert_int_equal(st.patches, 17);
	assert_int_equal(st.arg_words_changing, 1);
	rig_down(&r); /* the log check proves each launch ran with its own step */
}

/* Iterations with `shape` for ops 100..199, as after a change of sequence length. */
static uint64_t shaped_iterations(struct rig *r, int from, int to, uint32_t shape)
{
	uint64_t before = stats(r).ops_replayed;
	for (int it = from; it < to; it++) {
		for (uint32_t p = 0; p < LOOP; p++) {
			struct cg_op op = mkop(p, p >= 100 && p < 200 ? shape : 1, 0x7000000 + p * 0x1000, 1);
			fake_submit(&r->fb, r->s[0], 0, &op);
		}
		fake_boundary(&r->fb, r->s[0], 0, CG_R_SYNC);
	}
	return stats(r).ops_replayed - before;
}

/* One kernel launched 1000 times per step (a micro-benchmark, or identical layers): the same
 * chunk recurs at every position, each position with its own arguments. Each position gets its
 * own graph instance, so after the first replayed step only the argument that really changes
 * (one launch in ten) is patched. */
static void test_recurring_chunk_instances(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	enum { K = 1000, STEPS = 12 };
	uint64_t patches_before = 0, replayed_before = 0;
	for (int it = 0; it < STEPS; it++) {
		for (uint32_t k = 0; k < K; k++) {
			uint64_t scalar = k % 10 == 0 ? (uint64_t)it : 0;
			struct cg_op op = mkop(0, 1, 0x7000000 + k * 0x100, scalar);
			fake_submit(&r.fb, r.s[0], 0, &op);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
		if (it == STEPS - 3) {
			patches_before = stats(&r).patches;
			replayed_before = stats(&r).ops_replayed;
		}
	}
	struct cg_stats st = stats(&r);
	/* Last two steps: everything replayed, and only the launches whose scalar changed patched. */
	assert_int_equal(st.ops_replayed - replayed_before, 2 * K);
	assert_true(st.patches - patches_before <= 2 * (K / 10));
	assert_true(st.patches - patches_before >= 2 * (K / 10) - 2 * 2);
	/* Each position's instance keeps an executable of its own (its pointer differs from the
	 * other positions', yet not from step to step): only instance 0 may share. */
	assert_true(st.graphs_built > st.chunks_learned);
	assert_true(r.fb.shared_builds <= (long)st.chunks_learned);
	rig_down(&r);
}

static void test_shape_change_new_variant_then_reuse(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	assert_int_equal(shaped_iterations(&r, 0, 10, 1), 8 * LOOP);
	shaped_iterations(&r, 10, 13, 2);                /* the new shape is learned */
	uint64_t built = stats(&r).graphs_built;
	assert_int_equal(shaped_iterations(&r, 13, 20, 2), 7 * LOOP);
	assert_int_equal(shaped_iterations(&r, 20, 25, 1), 5 * LOOP);  /* old variant reused */
	assert_int_equal(stats(&r).graphs_built, built);
	assert_int_equal(stats(&r).graphs_evicted, 0);
	rig_down(&r);
}

/* A chunk's graph counts as repaid once it ran 8 times (chunks_launched_8_times): every chunk of
 * a steady loop gets there; those of a shape met for a few iterations only are learned and
 * graphed, and do not. */
static void test_chunks_repaid(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	shaped_iterations(&r, 0, 20, 1);
	struct cg_stats st = stats(&r);
	uint64_t learned = st.chunks_learned;
	assert_true(learned > 0);
	assert_int_equal(st.chunks_repaid, learned);
	shaped_iterations(&r, 20, 27, 2);  /* learned in 3, replayed in 4 */
	st = stats(&r);
	assert_true(st.chunks_learned > learned);
	assert_int_equal(st.chunks_repaid, learned);
	shaped_iterations(&r, 27, 31, 2);  /* 8 runs now */
	assert_int_equal(stats(&r).chunks_repaid, st.chunks_learned);
	rig_down(&r);
}

static void test_sync_mid_iteration_cuts_chunk(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 20; it++) {
		for (uint32_t p = 0; p < LOOP; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
			fake_submit(&r.fb, r.s[0], 0, &op);
			if (p == 150)  /* loss.item() in the middle of the step */
				fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
	}
	struct cg_stats st = stats(&r);
	assert_int_equal(st.ops_replayed, 18 * LOOP);
	assert_int_equal(st.fallbacks[CG_R_SYNC], 0);  /* no chunk straddles the sync */
	rig_down(&r);
}

static void test_periodic_logging_keeps_replaying(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 60; it++) {
		uint64_t before = stats(&r).ops_replayed;
		for (uint32_t p = 0; p < LOOP; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
			fake_submit(&r.fb, r.s[0], 0, &op);
			if (it % 10 == 9 && p == 200) {
				for (uint32_t k = 0; k < 3; k++) {  /* logging: norms, a reduction */
					struct cg_op log = mkop(1000 + k, 1, 0x9000000, (uint64_t)it);
					fake_submit(&r.fb, r.s[0], 0, &log);
				}
			}
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
		uint64_t replayed = stats(&r).ops_replayed - before;
		if (it >= 3 && it % 10 != 9)
			assert_int_equal(replayed, LOOP);
		else if (it >= 3)  /* at most the chunks around the extra ops run eagerly */
			assert_true(replayed >= LOOP - 3 * 64);
	}
	rig_down(&r);
}

static void test_ten_thousand_op_iteration(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 6; it++) {
		for (uint32_t p = 0; p < 10000; p++) {
			struct cg_op op = mkop(p % 50, p / 50, 0x7000000 + p * 0x1000, 1);
			fake_submit(&r.fb, r.s[0], 0, &op);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
	}
	struct cg_stats st = stats(&r);
	assert_int_equal(st.ops_replayed, 4 * 10000);
	assert_true(st.graphs_alive >= 10000 / 64 && st.graphs_alive <= 10000 / 16);
	rig_down(&r);
}

static void test_divergence_mid_chunk(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 12; it++) {
		uint64_t before = stats(&r).ops_replayed;
		for (uint32_t p = 0; p < LOOP; p++) {
			/* Iteration 8 takes another branch at op 150. */
			struct cg_op op = mkop(it == 8 && p == 150 ? 777 : p, 1, 0x7000000 + p * 0x1000, 1);
			fake_submit(&r.fb, r.s[0], 0, &op);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
		uint64_t replayed = stats(&r).ops_replayed - before;
		if (it == 8)
			assert_true(replayed >= LOOP - 2 * 64 && replayed < LOOP);
		else if (it > 8)
			assert_int_equal(replayed, LOOP);
	}
	struct cg_stats st = stats(&r);
	assert_true(st.fallbacks[CG_R_DIVERGENCE] > 0);
	assert_true(st.fallbacks[CG_R_DIVERGENCE] <= 64);
	assert_int_equal(r.fb.fallback_events[CG_R_DIVERGENCE], 1);
	assert_int_equal(r.fb.last_divergence.op_index, 8 * LOOP + 150);
	assert_memory_equal(r.fb.div_expected.sig, mkop(150, 1, 0, 0).sig, 96);
	assert_memory_equal(r.fb.div_got.sig, mkop(777, 1, 0, 0).sig, 96);
	rig_down(&r);
}

/* Ops whose signature or arguments are 64 KiB or longer match by their full lengths: a chunk
 * replays them, and an op one byte longer at the same place diverges. */
static void test_long_ops_match_by_length(void **state)
{
	(void)state;
	enum { LONG = 70000 };
	static unsigned char long_sig[LONG + 1], long_args[LONG + 1];
	for (int which = 0; which < 2; which++) {  /* a long signature, then long arguments */
		struct rig r;
		rig_up(&r, config(3, 64), 1);
		for (int it = 0; it < 12; it++) {
			uint64_t before = stats(&r).ops_replayed;
			for (uint32_t p = 0; p < LOOP; p++) {
				struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
				if (p == 150) {
					uint32_t len = LONG + (it == 8);  /* one byte longer at iteration 8 */
					memcpy(which ? long_args : long_sig, which ? op.args : op.sig, 64);
					if (which) {
						op.args = long_args, op.args_len = len;
					} else {
						op.sig = long_sig, op.sig_len = len;
						op.hash = 0x5150;  /* the same hash for both lengths */
					}
				}
				fake_submit(&r.fb, r.s[0], 0, &op);
			}
			fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
			uint64_t replayed = stats(&r).ops_replayed - before;
			if (it == 8)
				assert_true(replayed < LOOP);
			else if (it > 8)
				assert_int_equal(replayed, LOOP);
		}
		assert_int_equal(r.fb.last_divergence.op_index, 8 * LOOP + 150);
		rig_down(&r);
	}
}

static void test_boundary_flushes_partial_chunk(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 4; it++)
		iteration(&r, 0, (uint64_t)it);
	/* A host copy right after op 10: the deferred ops 0..10 must run before it, eagerly. */
	for (uint32_t p = 0; p <= 10; p++) {
		struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
		assert_int_equal(fake_submit(&r.fb, r.s[0], 0, &op), CG_TAKEN);
	}
	assert_true(cg_stream_pending(r.s[0]));
	/* They are the start of a chunk seen four times: a graph of their own, before the copy. */
	uint64_t launches = stats(&r).graph_launches;
	fake_boundary(&r.fb, r.s[0], 0, CG_R_HOST_COPY);  /* checks everything ran */
	assert_int_equal(stats(&r).graph_launches, launches + 1);
	assert_int_equal(stats(&r).fallbacks[CG_R_HOST_COPY], 0);
	/* Ops 0..20 the next time, where that graph cannot be built: they run eagerly. */
	r.fb.fail_nth[FAKE_BUILD] = r.fb.calls[FAKE_BUILD] + 1;
	for (uint32_t p = 0; p <= 20; p++) {
		struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
		fake_submit(&r.fb, r.s[0], 0, &op);
	}
	fake_boundary(&r.fb, r.s[0], 0, CG_R_HOST_COPY);
	assert_int_equal(stats(&r).fallbacks[CG_R_HOST_COPY], 21);
	assert_int_equal(r.fb.fallback_events[CG_R_HOST_COPY], 1);
	rig_down(&r);
}

/* A step of 6 kernels between the program's copies, and every 4th step a copy to the host
 * mid-step (a metric read): the ops before that copy are the start of the step's chunk, known
 * from the steps before, and the ops after it its rest; both replay as graphs of their own from
 * the first such step on. Also where a sync cuts the rest again (step 23), and where the copy
 * comes right after the first op (steps 27 and 31): in step 27 extra work follows the rest's
 * first op, which then runs eagerly as it came. */
static void test_host_copy_mid_step_now_and_then(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (uint64_t it = 0; it < 40; it++) {
		uint64_t before = stats(&r).ops_replayed;
		uint32_t copy_after = it == 27 || it == 31 ? 0 : it % 4 == 3 ? 2 : 6;
		fake_boundary(&r.fb, r.s[0], 0, CG_R_HOST_COPY);  /* the step's input */
		for (uint32_t p = 0; p < 6; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, it);
			fake_submit(&r.fb, r.s[0], 0, &op);
			if (p == copy_after)
				fake_boundary(&r.fb, r.s[0], 0, CG_R_HOST_COPY);
			if (p == 4 && it == 23)
				fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
			if (p == 1 && it == 27) {
				struct cg_op extra = mkop(777, 1, 0x9000000, it);
				fake_submit(&r.fb, r.s[0], 0, &extra);
			}
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_HOST_COPY);  /* the loss */
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
		uint64_t replayed = stats(&r).ops_replayed - before;
		if (it >= 3)
			assert_int_equal(replayed, it == 27 ? 1 : 6);
	}
	assert_int_equal(stats(&r).fallbacks[CG_R_HOST_COPY], 0);
	assert_int_equal(stats(&r).fallbacks[CG_R_SYNC], 0);
	rig_down(&r);
}

/* The shim may pass its own hash; equal hashes of different signatures must not be trusted. */
static void test_hash_collisions_are_not_trusted(void **state)
{
	struct rig r;
	rig_up(&r, config(2, 16), 1);
	for (int it = 0; it < 10; it++) {
		for (uint32_t p = 0; p < 40; p++) {
			/* Every 4th iteration swaps two kernels that share the hash. */
			uint32_t kernel = it % 4 == 3 && p == 21 ? 22 : it % 4 == 3 && p == 22 ? 21 : p;
			struct cg_op op = mkop(kernel, 1, 0x7000000 + p * 0x1000, 1);
			op.hash = 42;
			fake_submit(&r.fb, r.s[0], 0, &op);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
	}
	assert_true(stats(&r).ops_replayed > 0);
	assert_true(stats(&r).fallbacks[CG_R_DIVERGENCE] > 0);
	rig_down(&r);
}

static void test_build_failure_runs_eagerly(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	r.fb.fail_nth[FAKE_BUILD] = 1;
	for (int it = 0; it < 12; it++)
		iteration(&r, 0, (uint64_t)it);
	struct cg_stats st = stats(&r);
	assert_true(st.fallbacks[CG_R_BUILD_FAILED] > 0);
	/* the failed build, 2 skipped occurrences, the rebuilding one: all eager, all reported */
	assert_int_equal(r.fb.fallback_events[CG_R_BUILD_FAILED], 4);
	/* The failed chunk backs off two occurrences and is rebuilt at the third. */
	assert_int_equal(st.graphs_built, r.fb.built);
	assert_int_equal(st.chunks_disabled, 0);
	assert_true(st.ops_replayed >= 9 * LOOP - 3 * 64);
	rig_down(&r);
}

static void drift_iterations(struct rig *r, int n)
{
	for (int it = 0; it < n; it++) {
		for (uint32_t p = 0; p < LOOP; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, (uint64_t)it);
			fake_submit(&r->fb, r->s[0], 0, &op);
		}
		fake_boundary(&r->fb, r->s[0], 0, CG_R_SYNC);
	}
}

static void test_patch_failure(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	r.fb.fail_nth[FAKE_PATCH] = 10;  /* the fake scribbles on the node when it fails */
	drift_iterations(&r, 12);
	struct cg_stats st = stats(&r);
	/* The chunk runs eagerly when the patch fails, 2 skipped times, and once to rebuild. */
	uint64_t failed = st.fallbacks[CG_R_PATCH_FAILED];
	assert_true(failed > 0 && failed % 4 == 0 && failed / 4 <= 64);
	assert_int_equal(st.graphs_built, r.fb.built);
	assert_true(r.fb.built > (long)st.chunks_learned);  /* the broken graph was rebuilt */
	rig_down(&r);
}

static void test_launch_failure(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	r.fb.fail_nth[FAKE_LAUNCH] = 5;
	for (int it = 0; it < 12; it++)
		iteration(&r, 0, (uint64_t)it);
	struct cg_stats st = stats(&r);
	uint64_t failed = st.fallbacks[CG_R_LAUNCH_FAILED];
	assert_true(failed > 0 && failed % 4 == 0 && failed / 4 <= 64);
	assert_int_equal(st.ops_replayed, 10 * LOOP - failed);
	assert_int_equal(st.graph_launches, r.fb.graph_launches);
	assert_int_equal(r.fb.calls[FAKE_LAUNCH], st.graph_launches + 1);
	rig_down(&r);
}

static void test_repeated_failures_disable(void **state)
{
	struct rig r;
	struct cg_engine_config cfg = *config(2, 64);
	cfg.fail_limit = 3;
	rig_up(&r, &cfg, 1);
	r.fb.fail_permille[FAKE_BUILD] = 1000;
	for (int it = 0; it < 40; it++)
		iteration(&r, 0, (uint64_t)it);
	struct cg_stats st = stats(&r);
	assert_int_equal(st.graphs_built, 0);
	assert_true(st.chunks_learned > 0);
	assert_int_equal(st.chunks_disabled, st.chunks_learned);
	assert_int_equal(r.fb.events[CG_EV_CHUNK_DISABLED], st.chunks_learned);
	/* it 1: build fails, 2-3 skipped, 4: fails, 5-8 skipped, 9: fails -> disabled */
	assert_int_equal(r.fb.calls[FAKE_BUILD], 3 * st.chunks_learned);
	assert_int_equal(st.fallbacks[CG_R_DISABLED], 30 * LOOP);
	rig_down(&r);
}

/* A backend that times chunks: the runs it was asked to sample, in order, and whether the
 * chunk had its graph yet (a chunk's graph is launched only once built). It may decline every
 * eager sample of a chunk without a graph, the samples of its learning sightings. */
#define SAMPLES_MAX 256
static struct {
	uint64_t key[SAMPLES_MAX];
	bool graph[SAMPLES_MAX];
	int n;
	bool open;
	long launches_at_begin[SAMPLES_MAX];
	bool built[SAMPLES_MAX];  /* its chunk had a graph when it was taken */
	bool back[SAMPLES_MAX];   /* handed back to the engine */
	uint64_t built_keys[SAMPLES_MAX];
	int nbuilt;
	bool decline_learning;
	int decline_first;        /* and the first this many of them */
	int declined;             /* learning samples declined */
	void (*event)(void *be, const struct cg_event *ev);  /* the fake's own */
} sampled;

static bool sampled_built(uint64_t key)
{
	for (int i = 0; i < sampled.nbuilt; i++)
		if (sampled.built_keys[i] == key)
			return true;
	return false;
}

static void sample_event(void *be, const struct cg_event *ev)
{
	if (ev->kind == CG_EV_GRAPH_BUILT && !sampled_built(ev->chunk_key) &&
	    sampled.nbuilt < SAMPLES_MAX)
		sampled.built_keys[sampled.nbuilt++] = ev->chunk_key;
	sampled.event(be, ev);
}

static bool sample_begin(void *be, void *stream, uint64_t key, bool graph)
{
	const struct fake_backend *fb = be;
	if (sampled.open || sampled.n == SAMPLES_MAX)
		return false;
	if ((sampled.decline_learning || sampled.declined < sampled.decline_first) && !graph &&
	    !sampled_built(key)) {
		sampled.declined++;
		return false;
	}
	sampled.key[sampled.n] = key;
	sampled.graph[sampled.n] = graph;
	sampled.launches_at_begin[sampled.n] = fb->graph_launches;
	sampled.built[sampled.n] = sampled_built(key);
	sampled.open = true;
	return true;
}

static void sample_end(void *be, void *stream, bool ok)
{
	assert_true(sampled.open && ok);
	sampled.open = false;
	sampled.n++;
}

/* A rig whose backend takes every cost-gate sample the engine asks for, into `sampled`. */
static void rig_up_sampled(struct rig *r, const struct cg_engine_config *cfg)
{
	rig_up(r, cfg, 1);
	memset(&sampled, 0, sizeof(sampled));
	r->fb.table.time_begin = sample_begin;
	r->fb.table.time_end = sample_end;
	sampled.event = r->fb.table.event;
	r->fb.table.event = sample_event;
}

/* The samples taken so far, handed back with these times (outside engine calls, as the shim
 * does after a boundary). */
static void hand_back(struct rig *r, double eager_us, double graph_us)
{
	for (int i = 0; i < sampled.n; i++) {
		if (sampled.back[i])
			continue;
		sampled.back[i] = true;
		cg_stream_timing(r->s[0], sampled.key[i], sampled.graph[i],
		                 sampled.graph[i] ? graph_us : eager_us);
	}
}

/* Samples of the same chunk taken before sample i. */
static int sampled_before(int i)
{
	int seen = 0;
	for (int j = 0; j < i; j++)
		seen += sampled.key[j] == sampled.key[i];
	return seen;
}

/* One sample of each kind, as if both had been read back. */
static void timing_pair(struct rig *r, uint64_t key, double eager_us, double graph_us)
{
	cg_stream_timing(r->s[0], key, true, graph_us);
	cg_stream_timing(r->s[0], key, false, eager_us);
}

/* The GPU alone: no host time saved by a graph to weigh against its extra GPU time. */
static const struct cg_engine_config *config_gpu_only(uint32_t warmup, uint32_t chunk_max)
{
	static struct cg_engine_config cfg;
	cfg = *config(warmup, chunk_max);
	cfg.launch_host_us = cfg.graph_launch_host_us = 0;
	return &cfg;
}

/* The sighting that earns a chunk its graph (its `warmup`th) is held as it comes and runs as
 * that graph, built from its own arguments (no patch), whether or not the backend can time it:
 * at the default warmup a loop is replayed from its second iteration on. */
static void test_earning_sighting_runs_as_its_graph(void **state)
{
	for (uint32_t warmup = 2; warmup <= 3; warmup++)
		for (int timed = 0; timed < 2; timed++) {
			struct rig r;
			if (timed)
				rig_up_sampled(&r, config(warmup, 64));
			else
				rig_up(&r, config(warmup, 64), 1);
			for (uint32_t it = 0; it < 6; it++) {
				uint64_t before = stats(&r).ops_replayed;
				iteration(&r, 0, it);
				uint64_t replayed = stats(&r).ops_replayed - before;
				assert_int_equal(replayed, it + 1 < warmup ? 0 : LOOP);
				if (it + 1 == warmup)
					assert_int_equal(stats(&r).patches, 0);
				if (timed)
					hand_back(&r, 10.0, 8.0);
			}
			struct cg_stats st = stats(&r);
			assert_int_equal(st.fallbacks[CG_R_LEARNING], (warmup - 1) * LOOP);
			assert_int_equal(st.ops_eager, (warmup - 1) * LOOP);
			/* the eager samples: the sightings between the first and the earning one */
			assert_int_equal(st.learning_samples, timed ? (warmup - 2) * st.chunks_learned : 0);
			rig_down(&r);
		}
}

/* Two chunks of a step begin with the same kernel (conf-rt-ptds: a step's first chunk and the
 * one after its event record both start with the same mixing kernel; a transformer's layers):
 * the learning chunk last seen beginning with it is the step's second, so the step's first
 * chunk is held for it; where the ops leave it, the hold goes over to the chunk that begins
 * with them, and both sightings that earn a graph run as it (at warmup 2, in the second step).
 * Without that, the first chunk's earning sighting ran eagerly and replayed a step later. */
static void test_chunks_that_begin_alike_run_as_their_graphs(void **state)
{
	static const uint32_t first[] = { 1, 2, 3, 4, 5, 6, 7, 8 }, second[] = { 1, 9, 10 };
	for (int timed = 0; timed < 2; timed++) {
		struct rig r;
		if (timed)
			rig_up_sampled(&r, config(2, 64));
		else
			rig_up(&r, config(2, 64), 1);
		for (uint32_t it = 0; it < 4; it++) {
			uint64_t before = stats(&r).ops_replayed;
			for (uint32_t p = 0; p < 8; p++) {
				struct cg_op op = mkop(first[p], 1, 0x7000000 + p * 0x1000, it);
				fake_submit(&r.fb, r.s[0], 0, &op);
			}
			fake_boundary(&r.fb, r.s[0], 0, CG_R_EVENT);
			for (uint32_t p = 0; p < 3; p++) {
				struct cg_op op = mkop(second[p], 1, 0x8000000 + p * 0x1000, it);
				fake_submit(&r.fb, r.s[0], 0, &op);
			}
			fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
			assert_int_equal(stats(&r).ops_replayed - before, it == 0 ? 0 : 11);
			if (timed)
				hand_back(&r, 10.0, 8.0);
		}
		assert_int_equal(stats(&r).fallbacks[CG_R_LEARNING], 11);
		assert_int_equal(stats(&r).ops_eager, 11);
		rig_down(&r);
	}
}

/* The first eager samples come from the chunks' learning sightings, which run eagerly anyway,
 * and the sighting that earns a chunk its graph runs as that graph. Each chunk here: an eager
 * sample from its second sighting (its first is cold), its third replayed as its graph, then
 * three samples of its graph; the second eager sample the gate wants at this warmup comes from
 * a later occurrence (once, between the graph's), since these graphs take more GPU time than
 * their eager ops, and then never again. */
static void test_cost_samples_from_learning(void **state)
{
	struct rig r;
	rig_up_sampled(&r, config_gpu_only(3, 64));
	for (int it = 0; it < 20; it++) {
		iteration_to(&r, 0, CG_R_EVENT);  /* the host does not wait: nothing exposed */
		hand_back(&r, 10.0, 10.1);  /* a graph a little slower on the GPU: not settled */
		if (it == 0)
			assert_int_equal(sampled.n, 0);
	}
	int chunks = 0;
	for (int i = 0; i < sampled.n; i++) {
		int seen = sampled_before(i);
		assert_int_equal(sampled.graph[i], seen != 0 && seen != 3);
		assert_int_equal(sampled.built[i], seen != 0);
		assert_true(seen < 5);
		chunks += seen == 0;
	}
	assert_true(chunks > 1);
	assert_int_equal(sampled.n, 5 * chunks);
	struct cg_stats st = stats(&r);
	assert_int_equal(st.fallbacks[CG_R_COST_SAMPLE], LOOP);  /* chunks cover the loop */
	assert_int_equal(st.learning_samples, chunks);
	assert_int_equal(st.fallbacks[CG_R_LEARNING], 2 * LOOP);
	assert_int_equal(st.ops_replayed, 17 * LOOP);
	assert_int_equal(st.chunks_disabled, 0);
	rig_down(&r);
}

/* The gate acts on the eager samples, the first from learning: graphs slower than their ops
 * eager by more than the host time they save (and the noise) are disabled once their graph
 * samples are in, one occurrence of each having run eagerly for its second eager sample. */
static void test_cost_gate_acts_on_learning_samples(void **state)
{
	struct rig r;
	rig_up_sampled(&r, config(3, 64));
	const double slower = 64 * 3.4 - 2.5 + 20;  /* beyond any chunk's saving */
	for (int it = 0; it < 12; it++) {
		iteration_to(&r, 0, CG_R_EVENT);
		hand_back(&r, 10.0, 10.0 + slower);
	}
	int chunks = 0, eager = 0;
	for (int i = 0; i < sampled.n; i++) {
		int seen = sampled_before(i);
		chunks += seen == 0;
		eager += !sampled.graph[i];
		assert_int_equal(sampled.built[i], seen != 0);
	}
	assert_true(chunks > 1);
	assert_int_equal(eager, 2 * chunks);
	struct cg_stats st = stats(&r);
	assert_int_equal(st.chunks_disabled, chunks);
	assert_int_equal(r.fb.events[CG_EV_CHUNK_DISABLED], chunks);
	assert_int_equal(st.fallbacks[CG_R_COST_SAMPLE], LOOP);  /* chunks cover the loop */
	uint64_t before = st.ops_replayed;
	iteration_to(&r, 0, CG_R_EVENT);
	st = stats(&r);
	assert_int_equal(st.ops_replayed, before);  /* every chunk is eager now */
	rig_down(&r);
}

/* A learning sighting's held ops that do not end as their chunk run as they are, in order, as
 * if they had passed, and count as learning: the flusher's timeout, an op the chunk does not
 * have, a boundary inside the chunk. Nothing else changes: the loop is replayed after it. Held
 * for an eager sample (warmup 3) or to run as the graph the sighting earns (warmup 2, where the
 * chunks that did end as themselves ran as their graphs). */
static void test_held_learning_ops_released_exactly(void **state)
{
	for (uint32_t warmup = 2; warmup <= 3; warmup++) {
		struct rig r;
		rig_up_sampled(&r, config(warmup, 64));
		iteration_to(&r, 0, CG_R_EVENT);
		assert_false(cg_stream_held(r.s[0]));  /* a first sighting is never held */
		enum { TIMEOUT, OTHER_OP, BOUNDARY, DONE };
		int next = TIMEOUT, run = 0;
		for (uint32_t p = 0; p < LOOP; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
			enum cg_verdict v = fake_submit(&r.fb, r.s[0], 0, &op);
			bool held = cg_stream_held(r.s[0]);
			if (held) {
				assert_int_equal(v, CG_TAKEN);
				assert_true(cg_stream_pending(r.s[0]));
			}
			run = held ? run + 1 : 0;
			if (run < 3 || p < 40 * (uint32_t)(next + 1) || next == DONE)
				continue;
			if (next == TIMEOUT) {
				fake_flush(&r.fb, r.s[0], 0, CG_R_TIMEOUT);  /* checks that all of it ran */
			} else if (next == OTHER_OP) {
				struct cg_op other = mkop(777, 1, 0x9000000, 1);
				assert_int_equal(fake_submit(&r.fb, r.s[0], 0, &other), CG_PASS);
			} else {
				fake_boundary(&r.fb, r.s[0], 0, CG_R_HOST_COPY);
			}
			assert_false(cg_stream_held(r.s[0]));
			assert_false(cg_stream_pending(r.s[0]));
			next++;
		}
		assert_int_equal(next, DONE);
		fake_boundary(&r.fb, r.s[0], 0, CG_R_EVENT);
		struct cg_stats st = stats(&r);
		assert_int_equal(st.ops_eager, st.fallbacks[CG_R_LEARNING]);
		if (warmup == 3)
			assert_int_equal(st.ops_replayed, 0);
		else  /* the chunks of the second iteration that were not cut short */
			assert_true(st.ops_replayed > 0 && st.ops_replayed < LOOP);
		for (int it = 0; it < 4; it++)
			iteration_to(&r, 0, CG_R_EVENT);
		uint64_t before = stats(&r).ops_replayed;
		iteration_to(&r, 0, CG_R_EVENT);
		assert_int_equal(stats(&r).ops_replayed - before, LOOP);
		rig_down(&r);
	}
}

/* A stream whose learning samples the backend declines for a while (its slots full of samples
 * not read back yet) holds its chunks again later: 8 declined in a row, 64 sightings that
 * could have been held let pass, then the samples are taken again. */
static void test_declined_learning_samples_retried(void **state)
{
	struct rig r;
	rig_up_sampled(&r, config(3, 64));
	sampled.decline_first = 8;
	for (int it = 0; it < 4; it++) {
		for (uint32_t p = 0; p < 3000; p++) {
			struct cg_op op = mkop(p % 50, p / 50, 0x7000000 + p * 0x1000, 1);
			fake_submit(&r.fb, r.s[0], 0, &op);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
		hand_back(&r, 10.0, 8.0);
	}
	int learning = 0;
	for (int i = 0; i < sampled.n; i++)
		learning += !sampled.graph[i] && !sampled.built[i];
	assert_int_equal(sampled.declined, 8);
	assert_true(sampled.nbuilt > 64);
	/* one per chunk (its third sighting runs as its graph) but the 8 declined and the 64 let
	 * pass */
	assert_int_equal(learning, sampled.nbuilt - 8 - 64);
	rig_down(&r);
}

/* Where the backend declines the learning sightings' samples (a per-thread stream timed only
 * by its own thread, timing off for a while), the eager samples come from occurrences that
 * could have been replayed, as before: every chunk graph, graph, eager, eager, graph (the
 * least of two graph samples says whether an eager one could matter), then never again. */
static void test_cost_samples_alternate_then_stop(void **state)
{
	struct rig r;
	rig_up_sampled(&r, config_gpu_only(3, 64));
	sampled.decline_learning = true;
	for (int it = 0; it < 20; it++) {
		iteration_to(&r, 0, CG_R_EVENT);  /* the host does not wait: nothing exposed */
		hand_back(&r, 10.0, 10.1);  /* a graph a little slower on the GPU: not settled */
	}
	/* a stream whose learning samples keep being declined stops holding its chunks for them */
	assert_int_equal(sampled.declined, 8);
	int chunks = 0;
	for (int i = 0; i < sampled.n; i++) {
		int seen = sampled_before(i);
		assert_int_equal(sampled.graph[i], seen < 2 || seen == 4);
		assert_true(sampled.built[i]);
		assert_true(seen < 5);
		chunks += seen == 0;
	}
	assert_true(chunks > 1);
	assert_int_equal(sampled.n, 5 * chunks);
	/* The first sample of each chunk comes after its graph's first (untimed) launch. */
	assert_true(sampled.launches_at_begin[0] >= 1);
	struct cg_stats st = stats(&r);
	assert_int_equal(st.fallbacks[CG_R_COST_SAMPLE], 2 * LOOP);  /* chunks cover the loop */
	/* two learning sightings, the third replayed, two eager samples */
	assert_int_equal(st.ops_replayed, 16 * LOOP);
	/* Eager samples faster than the graphs' (beyond the 1 us of noise) disable every chunk. */
	for (int i = 0; i < sampled.n; i++)
		if (!sampled.graph[i])
			timing_pair(&r, sampled.key[i], 8.0, 10.1);
	assert_int_equal(stats(&r).chunks_disabled, chunks);
	rig_down(&r);
}

/* A graph whose GPU time is under half the host time it saves takes no more samples (the gate
 * cannot act on it): one graph sample per chunk after the eager one of its learning, and no
 * occurrence of it runs eagerly for a sample. A sample that never comes back holds the next
 * back for a while, not for good. */
static void test_cost_samples_stop_when_graphs_win(void **state)
{
	for (int lost = 0; lost < 2; lost++) {
		struct rig r;
		rig_up_sampled(&r, config(3, 64));
		for (int it = 0; it < 30; it++) {
			iteration(&r, 0, (uint64_t)it);
			if (!lost)
				hand_back(&r, 10.0, 8.0);
		}
		assert_true(r.fb.last_built_ops * 3.4 - 2.5 >= 2 * 8.0);
		int chunks = 0;
		for (int i = 0; i < sampled.n; i++) {
			int seen = sampled_before(i);
			assert_int_equal(sampled.graph[i], seen == 1);
			assert_int_equal(sampled.built[i], sampled.graph[i]);
			chunks += seen == 0;
		}
		assert_true(chunks > 1);
		struct cg_stats st = stats(&r);
		assert_int_equal(st.fallbacks[CG_R_COST_SAMPLE], 0);
		assert_int_equal(sampled.n, 2 * chunks);
		assert_int_equal(st.ops_replayed, 28 * LOOP);
		/* Lost: E (learning), 16 launches of each chunk waiting for it, G, then waiting for
		 * that one to the end. */
		for (int i = 0; lost && i < sampled.n; i++)
			assert_true(!sampled.graph[i] || sampled.launches_at_begin[i] >= 16 * chunks);
		assert_int_equal(st.chunks_disabled, 0);
		rig_down(&r);
	}
}

/* The gate weighs the least of each kind of sample: a sample can only come out longer than the
 * work (another stream's kernels alongside), so one slow graph run among fast ones says
 * nothing, and a graph slower by less than the samples' noise (1 us here) stays. A graph slower
 * in every sample is disabled, and its occurrences run eagerly from then on. */
static void test_cost_gate_disables_slower_chunk(void **state)
{
	static const double graph[][3] = {
		{ 10.1, 10.1, 50.0 },  /* one run slowed by other work */
		{ 10.7, 10.8, 10.9 },  /* within the noise */
		{ 11.6, 11.5, 12.0 },  /* slower */
	};
	for (int c = 0; c < 3; c++) {
		struct rig r;
		rig_up(&r, config_gpu_only(3, 64), 1);
		for (int it = 0; it < 4; it++)
			iteration_to(&r, 0, CG_R_EVENT);  /* the host does not wait: nothing exposed */
		uint64_t slow = r.fb.last_built_key;
		for (int i = 0; i < 3; i++) {
			assert_int_equal(stats(&r).chunks_disabled, 0);  /* too few samples */
			timing_pair(&r, slow, 10.0, graph[c][i]);
		}
		assert_int_equal(stats(&r).chunks_disabled, c == 2);
		assert_int_equal(r.fb.events[CG_EV_CHUNK_DISABLED], c == 2);
		uint64_t before = stats(&r).ops_replayed;
		for (int it = 4; it < 8; it++)
			iteration_to(&r, 0, CG_R_EVENT);
		struct cg_stats st = stats(&r);
		uint64_t gated = st.fallbacks[CG_R_COST_GATE];
		assert_true(c == 2 ? gated > 0 && gated % 4 == 0 && gated / 4 <= 64 : gated == 0);
		assert_int_equal(st.ops_replayed - before, 4 * LOOP - gated);
		rig_down(&r);
	}
}

/* A graph a little slower on the GPU than its ops launched in a burst still saves their host
 * launch time, and stays; one slower by more than that saving is disabled. */
static void test_cost_gate_weighs_host_saving(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 4; it++)
		iteration(&r, 0, (uint64_t)it);
	uint64_t key = r.fb.last_built_key;
	uint32_t n = r.fb.last_built_ops;
	assert_true(n >= 2);
	double saved = n * 3.4 - 2.5;   /* the default host costs */
	double eager = 0.05 * saved;     /* (a graph's whole time stays under the saving: not exposed) */
	for (int i = 0; i < 3; i++)
		timing_pair(&r, key, eager, eager + 0.9 * saved);
	assert_int_equal(stats(&r).chunks_disabled, 0);
	rig_down(&r);
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 4; it++)
		iteration(&r, 0, (uint64_t)it);
	assert_int_equal(r.fb.last_built_key, key);
	for (int i = 0; i < 3; i++)
		timing_pair(&r, key, eager, eager + 1.2 * saved);  /* slower by more than it saves */
	assert_int_equal(stats(&r).chunks_disabled, 1);
	assert_int_equal(r.fb.events[CG_EV_CHUNK_DISABLED], 1);
	rig_down(&r);
}

/* Every node of every chunk patched at every launch (each op's arguments change each step, as
 * the launch shapes of a decoding loop do): one patch per op per launch, and the chunks are
 * judged by their measured times like any other, not by how much they patch. */
static void test_every_node_patched_judged_by_times(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 10; it++) {
		for (uint32_t p = 0; p < LOOP; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, (uint64_t)it);
			fake_submit(&r.fb, r.s[0], 0, &op);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
	}
	struct cg_stats st = stats(&r);
	assert_int_equal(st.ops_replayed, 8 * LOOP);
	assert_int_equal(st.patches, 7 * LOOP);  /* (the first replay's graphs hold its arguments) */
	assert_int_equal(st.divergences, 0);
	uint64_t key = r.fb.last_built_key;
	uint32_t n = r.fb.last_built_ops;
	double saved = n * 3.4 - 2.5;   /* the default host costs */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(stats(&r).chunks_disabled, 0);
		timing_pair(&r, key, 0.05 * saved, 0.05 * saved + 5 * saved);
	}
	assert_int_equal(stats(&r).chunks_disabled, 1);
	rig_down(&r); /* the log check proves each launch ran with its own arguments */
}

/* The loop's last chunk of n ops was found exposed (before a sync) and cut: each last part,
 * exposed in turn, is cut again, down to one op, whose one-op graph, launched as the op comes,
 * is not exposed. A part of over two ops keeps two in its first; a part of two is cut after its
 * first op. */
static void expose_down_to_one(struct rig *r, uint32_t len, uint32_t n)
{
	uint32_t last = n, cuts = 1;
	for (;;) {
		last -= last == 2 ? 1 : last / 2 > 2 ? last / 2 : 2;
		assert_int_equal(r->fb.last_built_ops, last);
		double part_us = 4 * (last * 3.4 - 2.5);  /* (a part of two: 17 us) */
		for (int i = 0; i < 3; i++)
			timing_pair(r, r->fb.last_built_key, part_us, part_us);
		if (last == 1) {
			assert_int_equal(stats(r).chunks_disabled, cuts);
			return;
		}
		assert_int_equal(stats(r).chunks_disabled, cuts + 1);
		assert_int_equal(stats(r).exposed_splits, ++cuts);
		for (int it = 0; it < 4; it++)
			iteration_of(r, 0, len, CG_R_SYNC);
	}
}

/* The chunk the host waits for right after it (the iteration ends with a sync) starts on the GPU
 * only then. With a host that submits an op every 20 us (a Python loop: eager, each op would
 * have run while the host submitted the next), when its graph's GPU time is over the host time
 * the graph saves, it is not replayed
 * whole (EXPOSED) but learned again in two parts, cut after its first half: the first part's
 * graph starts while the host submits the rest. The part the host waits for is judged on its
 * own, and cut again while exposed, down to one op. The same chunk before a boundary the host
 * does not wait at (an event record) keeps its graph. Two loops: the model loop, whose last
 * chunk of 33 ops is cut 17, 9, 5, 3, 1, and one op shorter, whose last 32 are cut 16, 8, 4,
 * 2, 1. */
static void test_exposed_chunk_before_sync(void **state)
{
	for (int run = 0; run < 4; run++) {
		int at_sync = run & 1;
		uint32_t len = run < 2 ? LOOP : LOOP - 1;
		enum cg_reason end = at_sync ? CG_R_SYNC : CG_R_EVENT;
		struct rig r;
		rig_up(&r, config(3, 64), 1);
		rig_paced(&r, 20000);
		for (int it = 0; it < 4; it++)
			iteration_of(&r, 0, len, end);
		uint64_t key = r.fb.last_built_key;  /* the iteration's last chunk */
		uint32_t n = r.fb.last_built_ops;
		assert_int_equal(n, len == LOOP ? 33 : 32);
		double saved = n * 3.4 - 2.5;
		for (int i = 0; i < 3; i++)
			timing_pair(&r, key, 2 * saved, 2 * saved);  /* as fast as eager */
		assert_int_equal(stats(&r).chunks_disabled, at_sync);
		assert_int_equal(stats(&r).exposed_splits, at_sync);
		for (int it = 4; it < 8; it++)  /* the parts are learned (warmup 3) */
			iteration_of(&r, 0, len, end);
		uint64_t before = stats(&r).ops_replayed;
		iteration_of(&r, 0, len, end);
		assert_int_equal(stats(&r).ops_replayed - before, len);
		if (at_sync)
			expose_down_to_one(&r, len, n);
		struct cg_stats st0 = stats(&r);
		for (int it = 0; it < 4; it++)
			iteration_of(&r, 0, len, end);
		struct cg_stats st = stats(&r);
		/* nothing stays eager */
		assert_int_equal(st.fallbacks[CG_R_EXPOSED], st0.fallbacks[CG_R_EXPOSED]);
		assert_int_equal(st.ops_replayed - st0.ops_replayed, 4 * len);
		rig_down(&r);
	}
}

/* The loop's last chunk (33 ops), which the host waits for at every sync, as its work grows:
 * every graph run takes `grow` us longer on the GPU than the one before (a sequence longer by a
 * token a step), from 5 us (far under the 110 us of launches it saves: settled, not exposed).
 * Its graph is timed afresh at its 32nd launch and each time its launches grew by half, with
 * graph samples only; once a wait right after it would end later than with its ops launched
 * eagerly (from about 114 us, the host submitting an op every 20 us) it is found exposed and cut
 * in two, and so are its parts, as slow. Work that does not grow keeps its graph through every fresh timing. */
static void grow_loop(double grow, struct cg_stats *st)
{
	struct rig r;
	rig_up_sampled(&r, config(3, 64));
	rig_paced(&r, 20000);
	uint64_t last = 0;
	int first_window = 0;
	for (int it = 0; it < 200; it++) {
		iteration_to(&r, 0, CG_R_SYNC);
		if (!last && r.fb.last_built_ops == 33)
			last = r.fb.last_built_key;
		hand_back(&r, 5.0 + grow * it, 5.0 + grow * it);
		if (it == 20)
			first_window = sampled.n;
	}
	assert_int_not_equal(last, 0);
	int again = 0;
	for (int i = first_window; i < sampled.n; i++)
		if (sampled.key[i] == last) {
			assert_true(sampled.graph[i]);  /* no eager run to time it afresh */
			again++;
		}
	assert_true(again >= 3);
	*st = stats(&r);
	rig_down(&r);
}

static void test_exposed_as_it_grows(void **state)
{
	struct cg_stats st;
	grow_loop(0.0, &st);
	assert_true(st.retimings >= 3);  /* launches 32, 48, 72, 108, 162 */
	assert_int_equal(st.chunks_disabled, 0);
	assert_int_equal(st.exposed_splits, 0);
	grow_loop(1.0, &st);  /* (its parts, as slow, are cut in turn) */
	assert_true(st.chunks_disabled >= 1);
	assert_true(st.exposed_splits >= 1);
}

/* The loop of iteration_to, then from phase 2 on a stretch of 64 other ops up to another sync
 * (an evaluation step), two of them launching op `of`'s kernel. */
static void iteration_copying(struct rig *r, uint32_t of, int phase)
{
	iteration_to(r, 0, CG_R_SYNC);
	for (uint32_t q = 0; phase == 2 && q < 64; q++) {
		struct cg_op op = mkop(q == 20 || q == 40 ? of : 5000 + q, 1, 0x9000000 + q * 0x1000, 1);
		submit_paced(r, 0, &op);
	}
	if (phase == 2)
		fake_boundary(&r->fb, r->s[0], 0, CG_R_SYNC);
}

/* Graph launches in an iteration of the loop above once its stretch of other ops was learned,
 * after the loop's last chunk was found exposed or not. */
static uint64_t launches_after_relearning(uint32_t half_end, bool exposed)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	rig_paced(&r, 20000);
	for (int it = 0; it < 4; it++)
		iteration_copying(&r, half_end, 1);
	uint32_t n = r.fb.last_built_ops;
	double saved = n * 3.4 - 2.5;
	for (int i = 0; exposed && i < 3; i++)
		timing_pair(&r, r.fb.last_built_key, 2 * saved, 2 * saved);
	assert_int_equal(stats(&r).exposed_splits, exposed);
	for (int it = 0; it < 4; it++)  /* the exposed chunk's parts are learned */
		iteration_copying(&r, half_end, 1);
	if (exposed) {
		assert_int_equal(r.fb.last_built_ops, n - n / 2);
		for (int i = 0; i < 3; i++)  /* the part waited for stays graphed: not exposed */
			timing_pair(&r, r.fb.last_built_key, 1.0, 1.0);
	}
	for (int it = 0; it < 4; it++)  /* the stretch is learned */
		iteration_copying(&r, half_end, 2);
	struct cg_stats st0 = stats(&r);
	iteration_copying(&r, half_end, 2);
	struct cg_stats st = stats(&r);
	assert_int_equal(st.ops_replayed - st0.ops_replayed, LOOP + 64);
	rig_down(&r);
	return st.graph_launches - st0.graph_launches;
}

/* An exposed chunk is cut where its first half ends, not after every op launching the kernel
 * its half ends with: two ops of a stretch learned after the cut launch that kernel too, and
 * the stretch's chunks keep their length. The loop and the stretch replay in one graph per
 * iteration more than without the cut, all their ops. */
static void test_exposed_cut_only_there(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 4; it++)
		iteration_to(&r, 0, CG_R_SYNC);
	uint32_t n = r.fb.last_built_ops, half_end = LOOP - n + n / 2 - 1;
	rig_down(&r);
	assert_int_equal(launches_after_relearning(half_end, true),
	                 launches_after_relearning(half_end, false) + 1);
}

/* The same chunk with the host waiting after one iteration in ten (a copy to the host every 10
 * steps): its exposure is paid at one run in ten, its saving at every run, so it keeps its
 * graph with the times that make a chunk waited for every time stay eager. */
static void test_exposed_now_and_then(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 20; it++)
		iteration_to(&r, 0, it % 10 == 9 ? CG_R_SYNC : CG_R_EVENT);
	uint64_t key = r.fb.last_built_key;
	double saved = r.fb.last_built_ops * 3.4 - 2.5;
	for (int i = 0; i < 3; i++)
		timing_pair(&r, key, 2 * saved, 2 * saved);
	assert_int_equal(stats(&r).chunks_disabled, 0);
	uint64_t before = stats(&r).ops_replayed;
	for (int it = 20; it < 30; it++)
		iteration_to(&r, 0, it % 10 == 9 ? CG_R_SYNC : CG_R_EVENT);
	struct cg_stats st = stats(&r);
	assert_int_equal(st.fallbacks[CG_R_EXPOSED], 0);
	assert_int_equal(st.ops_replayed - before, 10 * LOOP);
	rig_down(&r);
}

/* A loop of `period` ops launching kernels base, base + 1, ..., each iteration ended by `why`. */
static void short_loop_from(struct rig *r, uint32_t base, uint32_t period, enum cg_reason why)
{
	for (uint32_t p = 0; p < period; p++) {
		struct cg_op op = mkop(base + p, 1, 0x7000000 + p * 0x1000, 1);
		submit_paced(r, 0, &op);
	}
	fake_boundary(&r->fb, r->s[0], 0, why);
}

static void short_loop_to(struct rig *r, uint32_t period, enum cg_reason why)
{
	short_loop_from(r, 1000, period, why);
}

/* Eager samples from occurrences that could have been replayed only where the gate could act
 * (the backend declining the learning sightings' samples). A graph between half and all of the
 * host time it saves: three graph samples (its exposure is weighed), no eager one. One over it
 * but faster than its eager ops: one eager sample, which
 * shows the gate cannot act. One slower than its eager ops by 0.6 of the saving (the gate acts
 * beyond all of it): two eager samples, alternating from the graph's, and it keeps its graph.
 * With the learning sighting's sample taken (its second; its third runs as its graph), one
 * fewer, and none from an occurrence that could have been replayed where one is enough. */
static void test_cost_samples_eager_only_where_gate_could_act(void **state)
{
	enum { NEAR, FASTER, CLOSE };
	for (int declined = 0; declined < 2; declined++)
	for (int c = NEAR; c <= CLOSE; c++) {
		struct rig r;
		rig_up_sampled(&r, config(3, 64));
		sampled.decline_learning = declined;
		const double saved = 42 * 3.4 - 2.5;  /* a loop of 42 ops is one chunk */
		const double graph = c == NEAR ? 0.7 * saved : 1.2 * saved;
		const double eager = c == CLOSE ? graph - 0.6 * saved : 2 * graph;
		for (int it = 0; it < 40; it++) {
			short_loop_to(&r, 42, CG_R_EVENT);
			hand_back(&r, eager, graph);
		}
		assert_int_equal(r.fb.last_built_ops, 42);
		int eagers = 0, graphs = 0, learning = 0;
		for (int i = 0; i < sampled.n; i++) {
			eagers += !sampled.graph[i];
			graphs += sampled.graph[i];
			learning += !sampled.built[i];
		}
		assert_int_equal(graphs, 3);
		assert_int_equal(learning, declined ? 0 : 1);
		assert_int_equal(eagers, c == NEAR ? !declined : c == FASTER ? 1 : 2);
		struct cg_stats st = stats(&r);
		assert_int_equal(st.fallbacks[CG_R_COST_SAMPLE], 42 * (eagers - learning));
		assert_int_equal(st.chunks_disabled, 0);
		rig_down(&r);
	}
}

/* A short loop whose chunks were learned before its period was found (with warmup 2, one of
 * 22 ops and one of 20, the last) replays in those chunks, not in units. With its last chunk
 * exposed, that chunk is cut in two as in any loop (the loop's units are given up, as where a
 * whole unit is exposed), and the chunk the host waits for is its last 10 ops: judged again
 * and not exposed, it keeps its graph, and every op replays. (Before, the loop kept its
 * units, and the 20 ops ran eagerly for good.) */
static void test_exposed_part_of_short_loop(void **state)
{
	struct rig r;
	rig_up(&r, config(2, 64), 1);
	rig_paced(&r, 20000);
	for (int it = 0; it < 4; it++)
		short_loop_from(&r, 4000, 42, CG_R_SYNC);
	assert_int_equal(r.fb.last_built_ops, 20);
	assert_int_equal(r.fb.built, 2);
	double saved = 20 * 3.4 - 2.5;
	for (int i = 0; i < 3; i++)
		timing_pair(&r, r.fb.last_built_key, 2 * saved, 2 * saved);
	assert_int_equal(stats(&r).chunks_disabled, 1);
	assert_int_equal(stats(&r).exposed_splits, 1);
	for (int it = 0; it < 8; it++)
		short_loop_from(&r, 4000, 42, CG_R_SYNC);
	assert_int_equal(r.fb.last_built_ops, 10);
	assert_int_equal(r.fb.built, 4);
	for (int i = 0; i < 3; i++)  /* the half waited for: far under its saving, not exposed */
		timing_pair(&r, r.fb.last_built_key, 0.5, 0.5);
	uint64_t before = stats(&r).ops_replayed;
	for (int it = 0; it < 10; it++)
		short_loop_from(&r, 4000, 42, CG_R_SYNC);
	assert_int_equal(stats(&r).ops_replayed - before, 10 * 42);
	rig_down(&r);
}

/* A loop of 42 ops is one unit, one chunk per iteration; with a sync after every iteration the
 * whole unit is exposed. It is not left eager whole: the loop is cut shorter from then on, and
 * the chunks before its last are replayed. (Before, every op of it ran eagerly.) */
static void test_exposed_unit_cut_shorter(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	rig_paced(&r, 20000);
	for (int it = 0; it < 8; it++)
		short_loop_to(&r, 42, CG_R_SYNC);
	assert_int_equal(r.fb.last_built_ops, 42);
	uint64_t key = r.fb.last_built_key;
	double saved = 42 * 3.4 - 2.5;
	for (int i = 0; i < 3; i++)
		timing_pair(&r, key, 2 * saved, 2 * saved);
	assert_int_equal(stats(&r).chunks_disabled, 1);
	for (int it = 0; it < 30; it++)
		short_loop_to(&r, 42, CG_R_SYNC);
	uint64_t before = stats(&r).ops_replayed;
	for (int it = 0; it < 10; it++)
		short_loop_to(&r, 42, CG_R_SYNC);
	struct cg_stats st = stats(&r);
	assert_true(st.ops_replayed - before >= 10 * 42 / 2);
	assert_true(st.graphs_built >= 3);  /* the unit's, then the shorter chunks' */
	assert_int_equal(st.ops, st.ops_replayed + st.ops_eager);
	rig_down(&r);
}

/* What a wait after a chunk costs deferred depends on the host's pace. A loop of 42 ops (one
 * chunk) with a sync after each, its GPU time twice the launch time its graph saves: submitted
 * an op every 20 us, eager ops would each have run while the host submitted the next, so the
 * graph, which starts after the last, is exposed. Submitted every 0.2 us (a C loop), the eager
 * ops queue up behind each other on the GPU just as the graph's nodes do, and the graph keeps
 * running: the wait ends no later. The same fast host with a graph 10% slower on the GPU than
 * its ops launched eagerly: the wait pays that, and it is exposed. Exposed, the loop is learned
 * again in shorter chunks (test_exposed_unit_cut_shorter). */
static void test_exposure_follows_host_pace(void **state)
{
	enum { SLOW_HOST, FAST_HOST, FAST_HOST_SLOWER_GRAPH };
	for (int c = SLOW_HOST; c <= FAST_HOST_SLOWER_GRAPH; c++) {
		struct rig r;
		rig_up(&r, config(3, 64), 1);
		rig_paced(&r, c == SLOW_HOST ? 20000 : 200);
		for (int it = 0; it < 8; it++)
			short_loop_to(&r, 42, CG_R_SYNC);
		assert_int_equal(r.fb.last_built_ops, 42);
		double saved = 42 * 3.4 - 2.5, eager = 2 * saved;
		double graph = c == FAST_HOST_SLOWER_GRAPH ? 1.1 * eager : eager;
		for (int i = 0; i < 3; i++)
			timing_pair(&r, r.fb.last_built_key, eager, graph);
		assert_int_equal(stats(&r).chunks_disabled, c != FAST_HOST);
		assert_int_equal(r.fb.events[CG_EV_CHUNK_DISABLED], c != FAST_HOST);
		uint64_t before = stats(&r).ops_replayed;
		for (int it = 0; it < 10; it++)
			short_loop_to(&r, 42, CG_R_SYNC);
		struct cg_stats st = stats(&r);
		assert_int_equal(st.exposed_splits, c != FAST_HOST);
		if (c == FAST_HOST)
			assert_int_equal(st.ops_replayed - before, 10 * 42);
		else
			assert_true(st.ops_replayed - before < 10 * 42);
		rig_down(&r);
	}
}

static void test_max_graphs_evicts_lru(void **state)
{
	struct rig r;
	struct cg_engine_config cfg = *config(2, 64);
	cfg.max_graphs = 2;
	rig_up(&r, &cfg, 1);
	for (int it = 0; it < 10; it++) {
		iteration(&r, 0, (uint64_t)it);
		assert_true(r.fb.graphs_alive <= 2);
	}
	struct cg_stats st = stats(&r);
	assert_true(st.graphs_evicted > 0);
	assert_int_equal(st.graphs_built - st.graphs_evicted, 2);
	assert_int_equal(r.fb.events[CG_EV_EVICTED], st.graphs_evicted);
	rig_down(&r);
}

/* Short iterations of 8 ops = two chunks of 4 (chunk_max 8 cuts every 4 ops). */
static void short_iteration(struct rig *r, int sid, uint32_t base)
{
	for (uint32_t p = 0; p < 8; p++) {
		struct cg_op op = mkop(base + p, 1, 0x7000000 + p * 0x1000, 1);
		fake_submit(&r->fb, r->s[sid], (uint32_t)sid, &op);
	}
	fake_boundary(&r->fb, r->s[sid], (uint32_t)sid, CG_R_SYNC);
}

static void test_max_graphs_never_evicts_other_streams(void **state)
{
	struct rig r;
	struct cg_engine_config cfg = *config(2, 8);
	cfg.max_graphs = 2;
	rig_up(&r, &cfg, 2);
	for (int it = 0; it < 6; it++)
		short_iteration(&r, 0, 0);
	for (int it = 0; it < 6; it++) {
		short_iteration(&r, 1, 100);
		short_iteration(&r, 0, 0);
	}
	struct cg_stats st = stats(&r);
	assert_int_equal(st.graphs_built, 2);
	assert_int_equal(st.graphs_evicted, 0);
	assert_int_equal(st.fallbacks[CG_R_MAX_GRAPHS], 5 * 8);  /* stream 1: it 1..5 */
	assert_int_equal(st.ops_replayed, 11 * 8);                /* stream 0 from it 1 on */
	rig_down(&r);
}

static void test_record_only_never_defers(void **state)
{
	struct rig r;
	struct cg_engine_config cfg = *config(1, 64);
	cfg.record_only = true;
	rig_up(&r, &cfg, 1);
	for (int it = 0; it < 10; it++) {
		for (uint32_t p = 0; p < LOOP; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000, 1);
			assert_int_equal(fake_submit(&r.fb, r.s[0], 0, &op), CG_PASS);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
	}
	struct cg_stats st = stats(&r);
	assert_true(st.chunks_learned >= LOOP / 64);
	assert_int_equal(st.graphs_built, 0);
	assert_int_equal(r.fb.calls[FAKE_BUILD], 0);
	assert_int_equal(st.ops_eager, 10 * LOOP);
	rig_down(&r);
}

static uint64_t fixed_clock(void)
{
	return 4242;
}

static void test_pending_and_flush(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	cg_engine_set_clock(r.e, fixed_clock);
	for (int it = 0; it < 4; it++)
		iteration(&r, 0, (uint64_t)it);
	assert_false(cg_stream_pending(r.s[0]));
	assert_int_equal(cg_stream_pending_since(r.s[0]), 0);
	struct cg_op op = mkop(0, 1, 0x7000000, 1);
	assert_int_equal(fake_submit(&r.fb, r.s[0], 0, &op), CG_TAKEN);
	assert_true(cg_stream_pending(r.s[0]));
	assert_int_equal(cg_stream_pending_since(r.s[0]), 4242);
	/* The flusher's timeout: the deferred op runs now; the rest of this iteration is eager
	 * up to the next cut, and the next iteration replays again (one timeout is the host being
	 * preempted, not a slow program). */
	fake_flush(&r.fb, r.s[0], 0, CG_R_TIMEOUT);
	assert_int_equal(stats(&r).fallbacks[CG_R_TIMEOUT], 1);
	assert_int_equal(stats(&r).chunks_disabled, 0);
	fake_flush(&r.fb, r.s[0], 0, CG_R_TIMEOUT);  /* nothing pending: returns false */
	for (uint32_t p = 1; p < LOOP; p++) {
		op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
		fake_submit(&r.fb, r.s[0], 0, &op);
	}
	fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
	uint64_t before = stats(&r).ops_replayed;
	iteration(&r, 0, 5);
	assert_int_equal(stats(&r).ops_replayed - before, LOOP);
	rig_down(&r);
}

/* A program that submits more slowly than the deferral budget: the part of a chunk that did
 * arrive in time becomes a chunk of its own, launched as a graph at once, and from the next
 * iteration on it is launched as soon as its last op arrives, without waiting. */
static void test_timeout_splits_chunk(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (int it = 0; it < 4; it++)
		iteration(&r, 0, (uint64_t)it);
	enum { ARRIVED = 3, SLOW = 3 /* TIMEOUTS_BEFORE_SPLIT */ };
	for (int it = 4; it < 4 + SLOW + 2; it++) {
		struct cg_stats before = stats(&r);
		for (uint32_t p = 0; p < ARRIVED; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
			assert_int_equal(fake_submit(&r.fb, r.s[0], 0, &op), CG_TAKEN);
		}
		if (it < 4 + SLOW) {
			assert_true(cg_stream_pending(r.s[0]));
			fake_flush(&r.fb, r.s[0], 0, CG_R_TIMEOUT);
		}
		/* Before the split: flushed eagerly. At the split: launched as a graph then. After
		 * it: launched on arrival of its last op, nothing left pending. */
		struct cg_stats mid = stats(&r);
		bool split = it >= 4 + SLOW - 1;
		assert_int_equal(mid.ops_replayed - before.ops_replayed, split ? ARRIVED : 0);
		assert_int_equal(mid.graph_launches - before.graph_launches, split ? 1 : 0);
		assert_false(cg_stream_pending(r.s[0]));
		for (uint32_t p = ARRIVED; p < LOOP; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, 1);
			fake_submit(&r.fb, r.s[0], 0, &op);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
	}
	rig_down(&r);
}

/* Allocation hook: fail the Nth allocation from now on, and then every 7th; count the blocks
 * alive so that a leak on a failure path shows. */
static long alloc_count, alloc_fail_at, blocks_alive;

static void *failing_realloc(void *p, size_t n)
{
	if (!n) {
		blocks_alive -= p != NULL;
		free(p);
		return NULL;
	}
	if (++alloc_count >= alloc_fail_at && (alloc_count - alloc_fail_at) % 7 == 0)
		return NULL;
	void *q = realloc(p, n);
	blocks_alive += q && !p;
	return q;
}

static void test_allocation_failure_degrades(void **state)
{
	long degraded = 0;
	for (alloc_fail_at = 1; alloc_fail_at < 120; alloc_fail_at++) {
		alloc_count = blocks_alive = 0;
		struct cg_engine_config cfg = *config(2, 16);
		cfg.realloc_fn = failing_realloc;
		struct rig r = { 0 };
		fake_backend_init(&r.fb, 1);
		r.e = cg_engine_new(&cfg, &r.fb.table, &r.fb);
		if (!r.e) {
			fake_backend_fini(&r.fb);
			continue;
		}
		r.s[0] = cg_stream_new(r.e, fake_stream(0), 0);
		if (!r.s[0]) {
			cg_engine_free(r.e, false);
			fake_backend_fini(&r.fb);
			assert_int_equal(blocks_alive, 0);
			continue;
		}
		for (int it = 0; it < 8; it++)
			iteration(&r, 0, (uint64_t)it);
		degraded += stats(&r).fallbacks[CG_R_NO_MEMORY] > 0;
		rig_down(&r);  /* nothing lost, nothing twice, whatever failed */
		assert_int_equal(blocks_alive, 0);
	}
	assert_true(degraded > 0);
}

static void test_sig_hash_and_reasons(void **state)
{
	unsigned char buf[200] = { 0 };
	uint64_t seen[201];
	for (size_t len = 0; len <= 200; len++) {
		seen[len] = cg_sig_hash(buf, len);
		assert_true(seen[len] != 0);
		for (size_t j = 0; j < len; j++)
			assert_true(seen[j] != seen[len]);  /* trailing zeros still count */
	}
	for (size_t i = 0; i < 96; i++) {
		buf[i] ^= 1;
		assert_true(cg_sig_hash(buf, 96) != seen[96]);
		buf[i] ^= 1;
	}
	assert_string_equal(cg_reason_name(CG_R_DIVERGENCE), "divergence");
	assert_string_equal(cg_reason_name(CG_R_COST_GATE), "cost_gate");
	assert_string_equal(cg_reason_name(CG_R_COUNT), "invalid");
	assert_true(strlen(cg_reason_hint(CG_R_SYNC)) > 10);
}

/* A short loop (14 ops, after 4 ops of set-up) whose first step has boundaries mid-step (first
 * launches of a library's kernels, run eagerly until their shapes are proven), so that its units
 * are out of step with the host copy the program makes after every 10th step (a cuFFT loop that
 * checks its result): at each copy the unit is cut in two, and both parts replay as graphs of
 * their own from the first copy on; nothing is learned again once the loop replays. */
static void test_short_loop_unit_cut_by_host_copy(void **state)
{
	struct rig r;
	rig_up(&r, config(3, 64), 1);
	for (uint32_t p = 0; p < 4; p++) {
		struct cg_op op = mkop(900 + p, 1, 0x8000000, 0);
		fake_submit(&r.fb, r.s[0], 0, &op);
	}
	uint64_t learning = 0;
	for (uint64_t it = 0; it < 40; it++) {
		for (uint32_t p = 0; p < 14; p++) {
			struct cg_op op = mkop(p, 1, 0x7000000 + p * 0x1000, it);
			fake_submit(&r.fb, r.s[0], 0, &op);
			if (it == 0 && (p == 3 || p == 8))
				fake_boundary(&r.fb, r.s[0], 0, CG_R_UNPROVEN_SHAPE);
		}
		if (it % 10 == 9) {
			fake_boundary(&r.fb, r.s[0], 0, CG_R_HOST_COPY);
			fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
		}
		if (it == 4)
			learning = stats(&r).fallbacks[CG_R_LEARNING];
	}
	struct cg_stats st = stats(&r);
	assert_int_equal(st.fallbacks[CG_R_LEARNING], learning);
	assert_int_equal(st.fallbacks[CG_R_HOST_COPY], 0);
	assert_true(st.ops_replayed >= st.ops - 4 - 4 * 14);
	rig_down(&r);
}

/* A place of the loop with more than one op sequence (a branch taken every other step, or one of
 * four kernels picked from the data): once each variant is learned, each is replayed where it
 * comes, with no divergence: the candidates that start alike are followed until the ops pick
 * one, and the summary counts the places with variants. `pick`: the variant of op 150 in
 * iteration `it` (1: the common one). Returns the chunks that went past a place's two. */
static uint64_t variants_replay(uint32_t (*pick)(int it))
{
	struct rig r;
	rig_up(&r, config(2, 64), 1);
	uint64_t div_at = 0, repl_at = 0;
	for (int it = 0; it < 40; it++) {
		if (it == 20) {
			div_at = stats(&r).divergences;
			repl_at = stats(&r).ops_replayed;
		}
		for (uint32_t p = 0; p < LOOP; p++) {
			struct cg_op op = mkop(p, p == 150 ? pick(it) : 1, 0x7000000 + p * 0x1000, 1);
			fake_submit(&r.fb, r.s[0], 0, &op);
		}
		fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
	}
	struct cg_stats st = stats(&r);
	assert_true(st.divergences > 0);  /* (each variant diverged where it was new) */
	assert_int_equal(st.divergences - div_at, 0);
	assert_int_equal(st.ops_replayed - repl_at, 20 * LOOP);
	assert_true(st.place_variants >= 1);
	rig_down(&r);
	return st.place_variants_past;
}

static uint32_t every_other(int it)
{
	return 1 + (uint32_t)(it % 2);
}

static uint32_t one_of_four(int it)
{
	return 1 + ((uint32_t)it * 2654435761u >> 13) % 4;
}

/* candidate_compares: a loop of distinct kernels, once its chunks are armed, compares one
 * candidate with each deferred op (each chunk is the only armed one its first op starts); with
 * two variants of a place, both are followed from the place's first op until one is picked. */
static void test_candidates_counted(void **state)
{
	(void)state;
	for (int variants = 0; variants < 2; variants++) {
		struct rig r;
		rig_up(&r, config(2, 64), 1);
		struct cg_stats at = { 0 };
		for (int it = 0; it < 30; it++) {
			if (it == 20)
				at = stats(&r);
			for (uint32_t p = 0; p < LOOP; p++) {
				struct cg_op op = mkop(p, p == 150 && variants ? every_other(it) : 1,
				                       0x7000000 + p * 0x1000, 1);
				fake_submit(&r.fb, r.s[0], 0, &op);
			}
			fake_boundary(&r.fb, r.s[0], 0, CG_R_SYNC);
		}
		struct cg_stats st = stats(&r);
		uint64_t compared = st.candidates - at.candidates, replayed = st.ops_replayed - at.ops_replayed;
		print_message("%s: %lu candidates compared for %lu ops replayed\n",
		              variants ? "two variants" : "one loop", (unsigned long)compared,
		              (unsigned long)replayed);
		assert_int_equal(replayed, 10 * LOOP);
		if (variants)
			assert_true(compared > replayed);
		else
			assert_int_equal(compared, replayed);
		rig_down(&r);
	}
}

static void test_place_variants_replay(void **state)
{
	/* two variants fit a place; four go past its bound, and are replayed all the same */
	assert_int_equal(variants_replay(every_other), 0);
	assert_true(variants_replay(one_of_four) > 0);
}

/* Greedy decoding as bench/decode_torch.py runs it on the GPU (60 ops a token, then the token's
 * read, a copy and a sync, then the next input's fill), with the variants its kernels showed
 * there: a GEMM of each of 3 layers that cuBLAS runs as a GEMV where the length is not a
 * multiple of 4, the fill's kernel picked by the address's alignment every other token, two
 * GEMMs split in three kernels (split-K) at some lengths, and a softmax kernel that changes
 * once the context is long enough. Once the first variants are learned, the variants replay
 * rather than diverge: at most 0.1 divergences a token (one where an unseen combination comes
 * first), 95% of the ops replayed. */
static void decode_token(struct rig *r, int t)
{
	for (uint32_t p = 0; p < 60; p++) {
		uint32_t k = p;
		if (p == 10 || p == 30 || p == 50)
			k = t % 4 == 0 ? 500 : 501;
		if (p == 15 || p == 35 || p == 55)
			k = t < 150 ? 600 : 601;
		for (uint32_t q = 0; (p == 20 || p == 40) && (t / 7) % 3 == 1 && q < 3; q++) {
			struct cg_op o = mkop(800 + q, 1, 0x7800000 + q * 0x1000, (uint64_t)t);
			fake_submit(&r->fb, r->s[0], 0, &o);
		}
		if ((p == 20 || p == 40) && (t / 7) % 3 == 1)
			continue;
		struct cg_op op = mkop(k, 1, 0x7000000 + p * 0x1000, (uint64_t)t);
		fake_submit(&r->fb, r->s[0], 0, &op);
	}
	fake_boundary(&r->fb, r->s[0], 0, CG_R_HOST_COPY);
	fake_boundary(&r->fb, r->s[0], 0, CG_R_SYNC);
	struct cg_op fill = mkop(t % 2 ? 700 : 701, 1, 0x9000000, (uint64_t)t);
	fake_submit(&r->fb, r->s[0], 0, &fill);
}

static void test_decode_variants_replay(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, config(2, 64), 1);
	struct cg_stats at = { 0 };
	for (int t = 0; t < 300; t++) {
		if (t == 40)
			at = stats(&r);
		decode_token(&r, t);
	}
	struct cg_stats st = stats(&r);
	uint64_t ops = st.ops - at.ops, replayed = st.ops_replayed - at.ops_replayed;
	print_message("tokens 40-299: %lu of %lu ops replayed, %lu divergences, %lu places with variants, %lu candidates compared\n",
	              (unsigned long)replayed, (unsigned long)ops,
	              (unsigned long)(st.divergences - at.divergences), (unsigned long)st.place_variants,
	              (unsigned long)(st.candidates - at.candidates));
	assert_true(replayed * 100 >= ops * 95);
	assert_true((st.divergences - at.divergences) * 10 <= 260);
	rig_down(&r);
}

/* Graphs on shared executables (backend.h): a decode's chunks, whose arguments change at every
 * op each token, are built with `share` (those seen change in warmup); a fixed loop's are not. Where the backend's claim says
 * a graph's executable ran another graph since (here a quarter of the launches, the fake then
 * scrambling the graph's nodes), every node is patched before the launch: what ran is still
 * exactly what was submitted (rig_down). */
static void test_shared_executables_patched_whole(void **state)
{
	(void)state;
	struct rig r;
	rig_up(&r, config(2, 64), 1);
	r.fb.steal_permille = 250;
	for (int t = 0; t < 120; t++)
		decode_token(&r, t);
	struct cg_stats st = stats(&r);
	print_message("%lu graphs built, %ld with share; %ld claims found another graph's nodes, "
	              "%lu patches in %lu launches\n", (unsigned long)st.graphs_built,
	              r.fb.shared_builds, r.fb.steals, (unsigned long)st.patches,
	              (unsigned long)st.graph_launches);
	/* (chunks learned from a single sighting, the first tokens', have no changes seen) */
	assert_true(st.graphs_built > 0 && r.fb.shared_builds * 4 >= (long)st.graphs_built * 3);
	assert_true(r.fb.steals > 0);
	assert_true(st.ops_replayed * 100 >= st.ops * 80);
	rig_down(&r);

	rig_up(&r, config(2, 64), 1);
	for (int it = 0; it < 10; it++)
		iteration_to(&r, 0, CG_R_SYNC);
	assert_true(stats(&r).graphs_built > 0);
	assert_int_equal(r.fb.shared_builds, 0);
	rig_down(&r);
}

/* The engine's invariants are checked in this build (not NDEBUG: the default build, CI): a
 * failed one names itself and aborts. */
static void test_assertions_are_on(void **state)
{
	(void)state;
#ifdef NDEBUG
	skip();
#else
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		dup2(fds[1], 2);
		volatile int two = 2;
		CG_ASSERT(two == 3);
		_exit(0);
	}
	close(fds[1]);
	char msg[256] = { 0 };
	ssize_t n = read(fds[0], msg, sizeof(msg) - 1);
	close(fds[0]);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
	assert_true(n > 0 && strstr(msg, "two == 3 does not hold"));
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steady_loop_replays),
		cmocka_unit_test(test_passed_launch_starts_its_chunk),
		cmocka_unit_test(test_settled_only_between_boundaries),
		cmocka_unit_test(test_boundaries_that_do_not_wait_change_nothing_on_a_quiet_stream),
		cmocka_unit_test(test_pointer_drift_patches_only),
		cmocka_unit_test(test_scalar_every_step_patched),
		cmocka_unit_test(test_recurring_chunk_instances),
		cmocka_unit_test(test_shape_change_new_variant_then_reuse),
		cmocka_unit_test(test_chunks_repaid),
		cmocka_unit_test(test_sync_mid_iteration_cuts_chunk),
		cmocka_unit_test(test_periodic_logging_keeps_replaying),
		cmocka_unit_test(test_ten_thousand_op_iteration),
		cmocka_unit_test(test_divergence_mid_chunk),
		cmocka_unit_test(test_boundary_flushes_partial_chunk),
		cmocka_unit_test(test_host_copy_mid_step_now_and_then),
		cmocka_unit_test(test_short_loop_unit_cut_by_host_copy),
		cmocka_unit_test(test_hash_collisions_are_not_trusted),
		cmocka_unit_test(test_build_failure_runs_eagerly),
		cmocka_unit_test(test_patch_failure),
		cmocka_unit_test(test_launch_failure),
		cmocka_unit_test(test_repeated_failures_disable),
		cmocka_unit_test(test_earning_sighting_runs_as_its_graph),
		cmocka_unit_test(test_chunks_that_begin_alike_run_as_their_graphs),
		cmocka_unit_test(test_cost_samples_from_learning),
		cmocka_unit_test(test_cost_gate_acts_on_learning_samples),
		cmocka_unit_test(test_held_learning_ops_released_exactly),
		cmocka_unit_test(test_declined_learning_samples_retried),
		cmocka_unit_test(test_cost_samples_alternate_then_stop),
		cmocka_unit_test(test_cost_samples_stop_when_graphs_win),
		cmocka_unit_test(test_cost_samples_eager_only_where_gate_could_act),
		cmocka_unit_test(test_cost_gate_disables_slower_chunk),
		cmocka_unit_test(test_cost_gate_weighs_host_saving),
		cmocka_unit_test(test_every_node_patched_judged_by_times),
		cmocka_unit_test(test_exposed_chunk_before_sync),
		cmocka_unit_test(test_exposed_cut_only_there),
		cmocka_unit_test(test_exposed_now_and_then),
		cmocka_unit_test(test_exposed_as_it_grows),
		cmocka_unit_test(test_exposed_part_of_short_loop),
		cmocka_unit_test(test_exposed_unit_cut_shorter),
		cmocka_unit_test(test_exposure_follows_host_pace),
		cmocka_unit_test(test_max_graphs_evicts_lru),
		cmocka_unit_test(test_max_graphs_never_evicts_other_streams),
		cmocka_unit_test(test_record_only_never_defers),
		cmocka_unit_test(test_pending_and_flush),
		cmocka_unit_test(test_timeout_splits_chunk),
		cmocka_unit_test(test_allocation_failure_degrades),
		cmocka_unit_test(test_sig_hash_and_reasons),
		cmocka_unit_test(test_assertions_are_on),
		cmocka_unit_test(test_place_variants_replay),
		cmocka_unit_test(test_candidates_counted),
		cmocka_unit_test(test_long_ops_match_by_length),
		cmocka_unit_test(test_decode_variants_replay),
		cmocka_unit_test(test_shared_executables_patched_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
