/* Why work ran eagerly instead of from a graph: one list, expanded into the enum, the
 * machine-readable names used in the report and a one-line hint a user can act on. */
#ifndef CG_POLICY_REASON_H
#define CG_POLICY_REASON_H

#include <stdbool.h>

/*       id             name                hint */
#define CG_REASONS(X) \
	X(NONE,          "none",             "") \
	X(LEARNING,      "learning",         "work seen fewer than CUGRAFT_WARMUP times; it is graphed once it repeats") \
	X(UNSEEN,        "unseen_signature", "a launch never seen before (new kernel, grid or shape): pad or bucket shapes so they repeat") \
	X(DIVERGENCE,    "divergence",       "the launch sequence left the learned pattern mid-chunk: data-dependent control flow or a shape change") \
	X(SYNC,          "sync",             "host waited for the GPU inside the repeating work (.item(), .cpu(), print(tensor)): move it out or do it every N steps") \
	X(QUERY,         "query",            "the host polled a stream (cudaStreamQuery) inside the repeating work: what was pending was submitted first; poll less often, or query an event recorded after the work") \
	X(HOST_COPY,     "host_copy",        "host<->device copy inside the repeating work: prefetch inputs before the loop body or use pinned buffers outside it") \
	X(ALLOC,         "alloc",            "allocation or free inside the repeating work (allocator cache miss): warm the allocator or preallocate") \
	X(PINNED_ALLOC,  "pinned_alloc",     "pinned host memory allocated inside the repeating work: allocate pinned buffers once, before the loop") \
	X(HOST_FUNC,     "host_func",        "host callback (cudaLaunchHostFunc / cuLaunchHostFunc) inside the repeating work") \
	X(EVENT,         "event",            "event record/wait/query splits the work: keep timing events outside the hot loop") \
	X(OTHER_THREAD,  "other_thread",     "another thread queried or synchronised the stream (watchdog, allocator polling events)") \
	X(STREAM_ORDER,  "stream_order",     "another stream's work came in between: what this stream deferred was submitted first, so that work reaches the GPU in the program's order across streams (the legacy stream's ordering, a kernel waiting for another stream's work)") \
	X(COLLECTIVE,    "collective",       "NCCL call: collectives run eagerly in the default scope (CUGRAFT_SCOPE=+collectives to graph them)") \
	X(CAPTURE,       "capture",          "the program captures a graph itself; its launches pass through") \
	X(UNKNOWN_API,   "unknown_api",      "an unclassified driver entry point was called; pending work was flushed before it") \
	X(MODULE,        "module",           "module load/unload or context change") \
	X(UNGRAPHABLE,   "ungraphable",      "a launch form cugraft does not graph (unknown parameter layout, event attributes)") \
	X(UNPROVEN_SHAPE, "unproven_shape", "a kernel launched with more threads per block or dynamic shared memory, or another grid, than the driver accepted for it before in its context: it ran eagerly, so that a shape only this kernel refuses fails at the program's own call; once accepted, it is graphed") \
	X(MEMOP_RANGE,   "memop_range",      "a memset or device copy outside one live allocation, or misaligned: it ran as submitted, so that the program got the driver's own answer at its call") \
	X(SCOPE,         "scope",            "excluded by CUGRAFT_SCOPE") \
	X(PER_THREAD,    "per_thread_stream", "work on a per-thread default stream ran eagerly: the private stream or events through which other threads reach its deferred work could not be created or recorded") \
	X(TIMEOUT,       "timeout",          "pending work waited CUGRAFT_MAX_DEFER_US without its chunk completing; submitted eagerly") \
	X(PROBE,         "probe",            "eager epochs that time the program against its graphed epochs: cugraft measures which mode is faster on this stream (see the report's decisions)") \
	X(MEASURED,      "measured_eager",   "deferring this stream's work into graphs was measured slower than eager launches (the program's own time per op, eager vs graphed epochs): it runs eagerly and is measured again later") \
	X(BUILD_FAILED,  "build_failed",     "building or instantiating a graph failed (see the API result); the chunk backs off") \
	X(PATCH_FAILED,  "patch_failed",     "updating a graph node's arguments failed; the chunk backs off") \
	X(LAUNCH_FAILED, "launch_failed",    "launching a graph failed; the chunk backs off") \
	X(COST_SAMPLE,   "cost_sample",      "runs of a graphed chunk submitted eagerly, timed on the GPU against its graph for the cost gate, where its learning runs gave no such sample") \
	X(COST_GATE,     "cost_gate",        "the graph ran slower than eager launches on the GPU; the chunk stays eager") \
	X(EXPOSED,       "exposed",          "the host waits for this work right after it (a sync or a copy to the host): deferred, it starts on the GPU only once its last op is submitted, and the wait would end later than with eager launches by more than its graph saves (timing_us); it stays eager") \
	X(MAX_GRAPHS,    "max_graphs",       "CUGRAFT_MAX_GRAPHS reached; least recently used graphs were evicted") \
	X(DISABLED,      "disabled",         "chunk disabled after repeated failures") \
	X(NO_MEMORY,     "no_memory",        "cugraft could not allocate memory for its own bookkeeping; the work ran eagerly") \
	X(EXIT,          "exit",             "pending work flushed at program exit") \
	X(VOTE_DECLINED, "vote_declined",    "ranks disagreed whether to replay this collective from a graph (a rank still warming up, changed buffers, or a dropped graph): all ran it eagerly") \
	X(VOTE_TIMEOUT,  "vote_timeout",     "a rank did not answer the collective vote within CUGRAFT_VOTE_TIMEOUT_MS (dead or stalled peer): collectives on this communicator stay eager") \
	X(VOTE_UNAVAILABLE, "vote_unavailable", "the vote communicator could not be made (no ncclCommSplit, or it failed) or a vote failed (a peer aborted it after its timeout): collectives on this communicator stay eager")

enum cg_reason {
#define CG_REASON_ENUM(id, name, hint) CG_R_##id,
	CG_REASONS(CG_REASON_ENUM)
#undef CG_REASON_ENUM
	CG_R_COUNT
};

const char *cg_reason_name(enum cg_reason r);
const char *cg_reason_hint(enum cg_reason r);

/* A boundary after which the host has seen the GPU's work: a sync, a copy to or from the host
 * (the program's waits). */
static inline bool cg_reason_waits(enum cg_reason r)
{
	return r == CG_R_SYNC || r == CG_R_HOST_COPY;
}

#endif
