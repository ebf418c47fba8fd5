/* A recording fake of the policy backend for unit tests: it logs every op that "runs" (eager,
 * passed through by the caller, or inside a launched graph) with its bytes as they were at
 * execution, keeps graphs with their own node arguments (patched like a real driver), and can
 * fail the Nth (or randomly chosen) build, patch or launch. It also plays the shim: fake_submit
 * and friends call the engine, run what it passes back, and remember what was submitted. */
#ifndef CG_TESTS_FAKE_BACKEND_H
#define CG_TESTS_FAKE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include "policy/control.h"
#include "policy/engine.h"

enum fake_call { FAKE_BUILD, FAKE_PATCH, FAKE_LAUNCH, FAKE_NCALLS };
#define FAKE_STREAMS 4

struct fake_exec {
	uint32_t stream;     /* fake_stream_id() of the stream it ran on */
	bool in_graph;
	uint32_t sig_len, args_len;
	unsigned char *sig, *args;
};

struct fake_backend {
	struct cg_backend table;   /* hand &table and the fake_backend itself to cg_engine_new */
	struct fake_exec *log;     /* what ran, in order */
	size_t nlog, cap;
	struct fake_exec *want;    /* what was submitted, in order */
	size_t nwant, want_cap;
	size_t ran[FAKE_STREAMS], submitted[FAKE_STREAMS];
	uint64_t calls[FAKE_NCALLS];      /* attempts so far */
	uint64_t fail_nth[FAKE_NCALLS];   /* fail exactly this attempt (1-based), 0: never */
	uint32_t fail_permille[FAKE_NCALLS]; /* and fail randomly at this rate */
	uint64_t rng;
	long graphs_alive, graph_launches, patches, eager, built;
	long shared_builds;        /* builds told they may share an executable */
	/* Claims that find the graph's executable holding another graph's nodes: at this rate (and
	 * every one while steal_all), a claim scrambles the graph's node arguments, as another graph
	 * run on a shared executable would have left them, and answers 1. */
	uint32_t steal_permille;
	bool steal_all;
	long steals;
	long contract_errors;      /* misuse: wrong stream/sig/size, destroyed graph used, PASS or
	                              boundary with work still pending, ... */
	long events[8];            /* by cg_event_kind */
	struct cg_control_decision decision[64];  /* the controller's decisions, in order */
	uint32_t ndecisions;
	long fallback_events[CG_R_COUNT];
	uint64_t last_built_key;   /* chunk_key of the latest CG_EV_GRAPH_BUILT */
	uint32_t last_built_ops;   /* and its chunk_ops */
	struct cg_event last_divergence;  /* expected/got are copied into the buffers below */
	struct cg_op div_expected, div_got;
	unsigned char div_bytes[2][512];
};

void fake_backend_init(struct fake_backend *fb, uint64_t seed);
void fake_backend_fini(struct fake_backend *fb);
/* Forget what ran and what was submitted (keeps counters and graphs). */
void fake_backend_clear_log(struct fake_backend *fb);

/* The shim's part: submit an op on stream `id` (< FAKE_STREAMS) and run it if the engine
 * passes it back, after checking that nothing of that stream is still pending. */
enum cg_verdict fake_submit(struct fake_backend *fb, struct cg_stream *s, uint32_t id,
                            const struct cg_op *op);
/* The shim's part for an op it runs itself after a boundary (a launch shape not yet accepted):
 * the boundary, the engine told (cg_passed), the op run. */
void fake_pass(struct fake_backend *fb, struct cg_stream *s, uint32_t id, const struct cg_op *op);
/* A boundary / a flush; afterwards every submitted op of the stream must have run. */
void fake_boundary(struct fake_backend *fb, struct cg_stream *s, uint32_t id, enum cg_reason why);
void fake_flush(struct fake_backend *fb, struct cg_stream *s, uint32_t id, enum cg_reason why);
/* Did every stream run exactly what was submitted, in order, with the same bytes, once?
 * (Ops still deferred count as missing.) On mismatch, `msg` says where. */
bool fake_backend_same(const struct fake_backend *fb, char *msg, size_t msg_len);

static inline void *fake_stream(uint32_t id)
{
	return (void *)(uintptr_t)(id + 1);
}

static inline uint32_t fake_stream_id(void *stream)
{
	return (uint32_t)((uintptr_t)stream - 1);
}

#endif
