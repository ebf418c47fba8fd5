/* Profile mode (CUGRAFT_PROFILE=1, set by `cugraft profile`): what the program's step is made
 * of, so the user learns what cugraft can gain at most before trying it. The host time spent in
 * the driver's launch calls, the sequence of launches and boundaries whose period is the step
 * (policy/period.h), the GPU busy time from CUPTI activity records (activity.h) and the part of
 * the launch calls during which the GPU had nothing to run. Written as the summary's
 * "profile":{...}. */
#ifndef CG_SHIM_FLOOR_H
#define CG_SHIM_FLOOR_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <cuda.h>

#include "policy/clock.h"
#include "policy/reason.h"

struct cg_json;

/* Set once at start-up when profiling; read on every launch (one load and a branch). */
extern atomic_bool cg_floor_timing;

/* A launch call of the program took the driver from t0 until now; `key` names what it
 * launched (the kernel's handle, a memop's signature hash), the same on every iteration. A
 * few of them, early in the run, are timed with CUPTI's kernel records paused: what the
 * records add to a launch call is left out of the bounds. */
void cg_floor_launch(uint64_t t0, uint64_t key);

/* The real driver call of a program launch, timed only when profiling: off, it costs a
 * relaxed load and a predictable branch (both arms are the same call). */
#define CG_FLOOR_TIMED(call, key)                                                               \
	(atomic_load_explicit(&cg_floor_timing, memory_order_relaxed) ?                         \
	 ({ uint64_t t0_ = cg_monotonic_ns(); CUresult fr_ = (call);                            \
	    cg_floor_launch(t0_, (uint64_t)(key)); fr_; }) :                                    \
	 (call))

/* The program instantiated exec from a graph of `launches` kernel, memset and copy nodes (the
 * launch calls it stands for); in profile mode only. */
void cg_floor_graph(CUgraphExec exec, uint32_t launches);
/* The program launches exec: in profile mode an event weighing its nodes, so that a step
 * replayed from a graph weighs what it runs. */
void cg_floor_graph_launch(CUgraphExec exec);

/* At start-up, when CUGRAFT_PROFILE is on: CUPTI activity (where it loads) and timing. */
void cg_floor_start(void);
/* A boundary the program made: an event of the sequence (inline: the boundary path pays a
 * load and a branch when profiling is off). */
void cg_floor_token(enum cg_reason why);
static inline void cg_floor_boundary(enum cg_reason why)
{
	if (atomic_load_explicit(&cg_floor_timing, memory_order_relaxed))
		cg_floor_token(why);
}
/* At exit: flushes the activity records and writes "profile":{...} (nothing when off). */
void cg_floor_json(struct cg_json *j);

#endif
