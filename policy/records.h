/* What the engine is configured with and what it reports: its configuration, its counters,
 * the events it hands the backend, the sites where deferred work diverged. Types only, shared
 * by the engine's interface (engine.h) and its internals. */
#ifndef CG_POLICY_RECORDS_H
#define CG_POLICY_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/op.h"
#include "policy/reason.h"

struct cg_engine_config {
	uint32_t warmup;      /* a chunk must be seen this many times before its graph is built */
	uint32_t chunk_max;   /* most ops in one chunk (CUGRAFT_CHUNK) */
	uint32_t max_graphs;  /* instantiated graphs alive at once, over all streams; LRU eviction */
	uint32_t fail_limit;  /* failures after which a chunk stays eager for good */
	bool record_only;     /* learn and count, never defer or build (recording pass-through) */
	/* Decide per stream from the program's measured time whether deferring pays (control.h);
	 * false: defer whatever matches an armed chunk. */
	bool measure;
	/* The deferral budget (ns; 0: the shim's own, never adapted): how long deferred work may
	 * wait for its chunk. Where chunks keep timing out (a Python-paced loop submits a chunk
	 * more slowly than that) a stream's budget doubles, up to budget_cap times this, and comes
	 * back down once its chunks complete well within it. */
	uint64_t defer_budget_ns;
	uint32_t budget_cap;
	/* Host time (us) one eager op costs and one graph launch costs: the host time a graph of n
	 * ops saves, n * launch_host_us - graph_launch_host_us, is what the cost gate weighs a
	 * graph's extra GPU time against. */
	double launch_host_us, graph_launch_host_us;
	/* Every engine allocation goes through this (NULL: libc realloc/free). n == 0 frees p and
	 * returns NULL. Lets tests make allocations fail: the engine then degrades to PASS/eager. */
	void *(*realloc_fn)(void *p, size_t n);
};

/* Statistics for the report (sums over all streams, atomically maintained): policy/stats.def. */
struct cg_stats {
#define CG_STAT(field, key, doc) uint64_t field;
#define CG_STAT_RATIO(key, num, den)
#include "policy/stats.def"
#undef CG_STAT
#undef CG_STAT_RATIO
	uint64_t fallbacks[CG_R_COUNT]; /* ops that ran eagerly, by reason */
};

/* Events for the report. Pointers are valid only during the callback. */
enum cg_event_kind {
	CG_EV_CHUNK_ARMED,     /* a chunk reached warmup; its graph is about to be built */
	CG_EV_GRAPH_BUILT,
	CG_EV_CHUNK_DISABLED,
	CG_EV_FALLBACK,        /* first occurrences of a reason (rate-limited by the engine) */
	CG_EV_EVICTED,
	CG_EV_BUILD_FAILED,    /* building a graph failed (detail: the API result) */
	CG_EV_DECISION,        /* the controller decided whether the stream defers (decision) */
};
struct cg_control_decision;
struct cg_control_summary;
/* What a chunk's timing showed when the cost gate or its exposure to a wait disabled it (us):
 * the graph's GPU time and its ops' GPU time launched eagerly (the least of their samples; 0
 * without an eager one), the host launch time the graph saves, the host's mean span submitting
 * it, how much later a wait right after it ends deferred, and the share of its runs waited
 * for. */
struct cg_chunk_cost {
	double graph_us, eager_us, saved_us, span_us, exposure_us, waited_share;
};
struct cg_event {
	enum cg_event_kind kind;
	enum cg_reason reason;
	uint64_t stream_id;
	uint64_t op_index;     /* index of the op on its stream */
	uint32_t chunk_ops;    /* ops in the chunk concerned */
	uint64_t chunk_key;
	const struct cg_op *expected;  /* template op (FALLBACK on divergence), else NULL */
	const struct cg_op *got;       /* submitted op, else NULL */
	const char *detail;            /* backend detail (failing API result) or NULL */
	const struct cg_control_decision *decision;  /* DECISION only (policy/control.h) */
	const struct cg_chunk_cost *cost;  /* CHUNK_DISABLED by the cost gate or exposure */
};

/* Where deferred work kept diverging, for the report: the op the chunk expected and the op that
 * came instead (kernel names, cut to CG_SITE_NAME - 1 bytes; "#" and the op's hash where it has
 * none), at op `at` (from 0) of an `ops`-op chunk, `count` times, the first and the latest time
 * at the stream's ops `first_op` and `last_op` (from 0): a site of the warm-up, or one that
 * keeps coming. */
#define CG_SITE_NAME 128
struct cg_divergence_site {
	uint64_t count;
	uint64_t first_op, last_op;
	uint32_t at, ops;
	char expected[CG_SITE_NAME], got[CG_SITE_NAME];
};

#endif
