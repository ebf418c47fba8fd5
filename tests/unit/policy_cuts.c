/* Where the engine cuts an op stream into chunks: the same program must cut the same way in
 * every process, although kernel handles differ from run to run; a loop of identical layers
 * must be cut so that each chunk recurs at the same places every step; and a short loop's unit
 * that a content-defined cut split is put together from exactly its ops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "fake_backend.h"
#include "policy/chunk.h"
#include "policy/engine.h"
#include "shim/base/sig.h"

#define KERNELS 24
#define BODY 150
#define ITERS 30
#define MAX_BUILT 512

/* The chunks a run built graphs for, in order: where each started, its length and key. */
struct built {
	uint64_t op_index[MAX_BUILT], key[MAX_BUILT];
	uint32_t ops[MAX_BUILT];
	uint32_t n;
};

/* What every trace must end with: each op ran once, in order, with its bytes; no misuse. */
static void finish(struct fake_backend *fb)
{
	char msg[128];
	if (!fake_backend_same(fb, msg, sizeof(msg)))
		fail_msg("%s", msg);
	assert_int_equal(fb->contract_errors, 0);
	fake_backend_fini(fb);
}

static struct built *recording;
static void (*fake_event_fn)(void *be, const struct cg_event *ev);

static void record_event(void *be, const struct cg_event *ev)
{
	if (ev->kind == CG_EV_GRAPH_BUILT && recording->n < MAX_BUILT) {
		recording->op_index[recording->n] = ev->op_index;
		recording->ops[recording->n] = ev->chunk_ops;
		recording->key[recording->n] = ev->chunk_key;
		recording->n++;
	}
	fake_event_fn(be, ev);
}

static const char *const names[KERNELS] = {
	"gemm_a", "gemm_b", "gemm_c", "softmax", "layernorm_fwd", "layernorm_bwd", "gelu_fwd",
	"gelu_bwd", "adamw", "add", "mul", "copy", "reduce", "attention_fwd", "attention_bwd",
	"embed", "embed_bwd", "loss", "loss_bwd", "transpose", "scale", "zero", "bias", "cast",
};

/* A program's loop (no host syncs: only content decides the cuts), launched through kernel
 * handles starting at `handle_base`, with layouts at whatever addresses malloc gives, and its
 * ops packed as the shim packs them. */
static void run(struct built *out, uint64_t handle_base, struct cg_stats *st)
{
	struct cg_layout *layout[KERNELS];
	for (int k = 0; k < KERNELS; k++) {
		uint32_t params = 1 + k % 4;
		layout[k] = calloc(1, sizeof(*layout[k]) + params * sizeof(layout[k]->p[0]));
		assert_non_null(layout[k]);
		layout[k]->n = params;
		for (uint32_t i = 0; i < params; i++)
			layout[k]->p[i].off = 8 * i, layout[k]->p[i].size = 8;
		layout[k]->size = 8 * params;
		layout[k]->name = names[k];
		layout[k]->hash = cg_layout_hash(layout[k]);
	}
	struct fake_backend fb;
	struct cg_engine_config cfg;
	cg_engine_config_default(&cfg);
	cfg.measure = false;  /* what is cut, not whether deferring pays (policy_control) */
	fake_backend_init(&fb, 1);
	fake_event_fn = fb.table.event;
	fb.table.event = record_event;
	memset(out, 0, sizeof(*out));
	recording = out;
	struct cg_engine *e = cg_engine_new(&cfg, &fb.table, &fb);
	assert_non_null(e);
	struct cg_stream *s = cg_stream_new(e, fake_stream(0), 0);
	assert_non_null(s);
	uint64_t seed = 42;
	uint32_t body[BODY];
	for (int i = 0; i < BODY; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		body[i] = (uint32_t)(seed >> 33) % KERNELS;
	}
	for (uint64_t it = 0; it < ITERS; it++) {
		for (int i = 0; i < BODY; i++) {
			uint32_t k = body[i];
			struct cg_sig sig;
			memset(&sig, 0, sizeof(sig));
			sig.kind = CG_K_KERNEL;
			sig.fn = handle_base + 0x40 * k;
			sig.layout = layout[k];
			struct { struct cg_launch_shape sh; uint64_t p[4]; } args = {
				{ .grid = { 1 + k, 1, 1 }, .block = { 128, 1, 1 } },
				{ 0x7000000 + 4096 * (uint64_t)i, it, k, 1 } };
			struct cg_op op = { .sig = &sig, .sig_len = cg_sig_len(&sig), .args = &args,
			                    .args_len = CG_ARGS_PARAMS + layout[k]->size, .name = names[k] };
			op.hash = cg_sig_stable_hash(&sig);
			fake_submit(&fb, s, 0, &op);
		}
	}
	cg_stream_free(s, CG_R_NONE);
	cg_engine_stats(e, st);
	cg_engine_free(e, false);
	finish(&fb);
	for (int k = 0; k < KERNELS; k++)
		free(layout[k]);
}

/* The same op trace launched through other handles (another process) cuts the same chunks:
 * same positions, lengths and keys, so the same graphs and the same share replayed. */
static void test_same_cuts_whatever_the_handles(void **state)
{
	static struct built a, b;
	struct cg_stats sa, sb;
	run(&a, 0x7f3a00001000ull, &sa);
	run(&b, 0x5591c0040000ull, &sb);
	assert_true(a.n > 0);
	assert_int_equal(a.n, b.n);
	for (uint32_t i = 0; i < a.n; i++) {
		assert_int_equal(a.op_index[i], b.op_index[i]);
		assert_int_equal(a.ops[i], b.ops[i]);
		assert_int_equal(a.key[i], b.key[i]);
	}
	assert_int_equal(sa.ops_replayed, sb.ops_replayed);
	assert_int_equal(sa.graph_launches, sb.graph_launches);
}

/* A trainer's step with no host sync: embedding, 12 forward layers (identical but for the end
 * of the last), loss, 12 identical backward layers, optimizer. None of its kernels hashes into
 * the content-defined cut range (with the default chunk of 64, (hash >> 32) < 2^28), so only
 * the loop's period can keep the cuts in place: cut every 64 ops instead, the chunks rotate
 * through the layers, and a chunk learned at one layer meets the last layer, the loss or the
 * optimizer where it expected another layer (before period detection: 80% replayed, 126
 * diverging ops per step). */
enum { LAYERS = 12, FWD = 40, BWD = 45, STEPS = 60, MEASURED_STEPS = 40 };
static unsigned char step_sig[200][48];

static void step_op(struct fake_backend *fb, struct cg_stream *s, int k, uint64_t ptr, uint64_t st)
{
	uint64_t args[3] = { ptr, st, (uint64_t)k };
	struct cg_op op = { .sig = step_sig[k], .sig_len = 48, .args = args, .args_len = 24 };
	fake_submit(fb, s, 0, &op);
}

static void trainer_step(struct fake_backend *fb, struct cg_stream *s, uint64_t st)
{
	for (int i = 0; i < 5; i++)
		step_op(fb, s, i, 0x1000 + i, st);
	for (int l = 0; l < LAYERS; l++)  /* the last one ends differently */
		for (int i = 0; i < FWD; i++)
			step_op(fb, s, (l == LAYERS - 1 && i >= 30 ? 50 : 10) + i, 0x100000ull * l + i * 64, st);
	for (int i = 0; i < 10; i++)
		step_op(fb, s, 100 + i, 0x2000 + i, st);
	for (int l = LAYERS - 1; l >= 0; l--)
		for (int i = 0; i < BWD; i++)
			step_op(fb, s, 120 + i, 0x100000ull * l + i * 64 + 8, st);
	for (int i = 0; i < 20; i++)
		step_op(fb, s, 170 + i, 0x3000 + i, st);
}

static void test_identical_layers_replay_without_divergence(void **state)
{
	uint64_t x = 88172645463325252ull;
	for (int k = 0; k < 200; k++) {
		do {
			for (int b = 0; b < 48; b++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				step_sig[k][b] = (unsigned char)x;
			}
		} while ((cg_sig_hash(step_sig[k], 48) >> 32) < (1ull << 28));
	}
	struct fake_backend fb;
	struct cg_engine_config cfg;
	cg_engine_config_default(&cfg);
	cfg.measure = false;  /* what is cut, not whether deferring pays (policy_control) */
	fake_backend_init(&fb, 1);
	struct cg_engine *e = cg_engine_new(&cfg, &fb.table, &fb);
	assert_non_null(e);
	struct cg_stream *s = cg_stream_new(e, fake_stream(0), 0);
	assert_non_null(s);
	struct cg_stats a, b;
	for (int st = 0; st < STEPS; st++) {
		if (st == STEPS - MEASURED_STEPS)
			cg_engine_stats(e, &a);
		trainer_step(&fb, s, (uint64_t)st);
	}
	cg_engine_stats(e, &b);
	double share = (double)(b.ops_replayed - a.ops_replayed) / (double)(b.ops - a.ops);
	print_message("replayed %.3f, %llu divergences (%llu ops) in %d steps, %llu loop iterations\n",
	              share, (unsigned long long)(b.divergences - a.divergences),
	              (unsigned long long)(b.fallbacks[CG_R_DIVERGENCE] - a.fallbacks[CG_R_DIVERGENCE]),
	              MEASURED_STEPS, (unsigned long long)(b.loop_iterations - a.loop_iterations));
	assert_true(share >= 0.95);
	assert_true(b.divergences - a.divergences <= MEASURED_STEPS);
	/* the detector counts the steps, not the layers */
	assert_true(b.loop_iterations - a.loop_iterations >= MEASURED_STEPS - 1);
	assert_true(b.loop_iterations - a.loop_iterations <= MEASURED_STEPS + 1);
	cg_stream_free(s, CG_R_NONE);
	cg_engine_free(e, false);
	finish(&fb);
}

static void *mem(void *p, size_t n)
{
	if (!n) {
		free(p);
		return NULL;
	}
	return realloc(p, n);
}

/* An op of the test below: signature and arguments of sizes that vary with i. */
static struct cg_op scratch_op(uint32_t i, unsigned char *sig, unsigned char *args)
{
	uint32_t sl = 8 + i % 5 * 8, al = 4 + i % 7 * 12;
	for (uint32_t b = 0; b < sl; b++)
		sig[b] = (unsigned char)(i * 31 + b);
	for (uint32_t b = 0; b < al; b++)
		args[b] = (unsigned char)(i * 17 + b * 3);
	return (struct cg_op){ .sig = sig, .sig_len = sl, .args = args, .args_len = al,
	                       .hash = cg_sig_hash(sig, sl), .name = i % 2 ? "even" : "odd" };
}

/* A short loop's first unit made whole from the chunk a content-defined cut took (the engine's
 * unit_front): the last k ops of that chunk's template put in front of the scratch hold exactly
 * what pushing every op in order gives: the same bytes, hashes, names and key, the scratch's
 * own ops moved behind them. */
static void test_unit_front_is_the_ops_in_order(void **state)
{
	enum { CUT = 9, REST = 6, MAX = 64 };
	unsigned char sig[64], args[128];
	struct cg_scratch cut, rest, whole;
	struct cg_index ix;
	assert_true(cg_scratch_init(&cut, MAX, mem));
	assert_true(cg_scratch_init(&rest, MAX, mem));
	assert_true(cg_scratch_init(&whole, MAX, mem));
	assert_true(cg_index_init(&ix, mem));
	for (uint32_t i = 0; i < CUT + REST; i++) {
		struct cg_op op = scratch_op(i, sig, args);
		cg_scratch_push(i < CUT ? &cut : &rest, &op, op.hash, mem);
	}
	struct cg_chunk *t = cg_index_add(&ix, &cut);
	assert_non_null(t);
	cg_chunk_note_args(t, &cut);
	for (uint32_t k = 1; k <= CUT; k++) {
		cg_scratch_reset(&whole);
		for (uint32_t i = CUT - k; i < CUT + REST; i++) {
			struct cg_op op = scratch_op(i, sig, args);
			cg_scratch_push(&whole, &op, op.hash, mem);
		}
		struct cg_scratch sc;
		assert_true(cg_scratch_init(&sc, MAX, mem));
		for (uint32_t i = 0; i < REST; i++) {
			struct cg_op op;
			cg_scratch_op(&rest, i, &op);
			cg_scratch_push(&sc, &op, op.hash, mem);
		}
		assert_true(cg_scratch_prepend(&sc, t, k, mem));
		assert_int_equal(sc.n, whole.n);
		assert_int_equal(cg_scratch_key(&sc), cg_scratch_key(&whole));
		for (uint32_t i = 0; i < sc.n; i++) {
			struct cg_op a, b;
			cg_scratch_op(&sc, i, &a);
			cg_scratch_op(&whole, i, &b);
			assert_int_equal(a.hash, b.hash);
			assert_ptr_equal(a.name, b.name);
			assert_int_equal(a.sig_len, b.sig_len);
			assert_int_equal(a.args_len, b.args_len);
			assert_memory_equal(a.sig, b.sig, a.sig_len);
			assert_memory_equal(a.args, b.args, a.args_len);
		}
		cg_scratch_fini(&sc, mem);
	}
	cg_index_fini(&ix);
	cg_scratch_fini(&cut, mem);
	cg_scratch_fini(&rest, mem);
	cg_scratch_fini(&whole, mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_cuts_whatever_the_handles),
		cmocka_unit_test(test_identical_layers_replay_without_divergence),
		cmocka_unit_test(test_unit_front_is_the_ops_in_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
