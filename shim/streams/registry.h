/* Program streams as the shim tracks them: one record per (context, stream), its lock, its
 * engine state, and the legacy default stream's implicit ordering against blocking streams. */
#ifndef CG_SHIM_STREAM_H
#define CG_SHIM_STREAM_H

#include <cuda.h>
#include <stdbool.h>

#include "policy/engine.h"
#include "shim/context/sstate.h"

/* The record for a stream handle as passed to an entry point; `ptsz` for the _ptsz forms (0
 * then means the calling thread's per-thread stream). NULL when the driver cannot tell. */
struct cg_sstate *cg_stream_get(CUstream h, bool ptsz);

/* Before an op or a boundary call reaches s (lock not held): submit what other streams deferred,
 * oldest first, so that work reaches the GPU in the program's order across streams. */
void cg_stream_order(struct cg_sstate *s);

/* After every engine call on s (lock held): mirror its pending state into the counters (and
 * keep a per-thread stream reachable from other threads: ptds.h). */
void cg_stream_sync_pending(struct cg_sstate *s);

/* A boundary call ordered on one stream (with legacy semantics) / observing every stream. */
void cg_boundary_stream(CUstream h, bool ptsz, enum cg_reason why);
void cg_boundary_all(enum cg_reason why);
/* Submit all pending work everywhere, and cut the learned chunks there (the call recurs with the
 * program's loop): unclassified entry points, attribute changes. Fast when nothing is pending. */
void cg_flush_all(enum cg_reason why);
/* The background flusher: flush pending work older than max_age_ns. Returns when to look again
 * (CLOCK_MONOTONIC ns): when the oldest work still deferred reaches that age, or retry_ns from
 * now for work whose age is unknown or whose flush failed; 0 when nothing is deferred. */
uint64_t cg_flush_older_than(uint64_t now_ns, uint64_t max_age_ns, uint64_t retry_ns);
bool cg_any_pending(void);
/* Read the cost-gate timing samples that completed, on every stream (the flusher). */
void cg_stream_read_timing(void);

/* Forget streams: one handle (stream destroy) or every stream of a context (NULL: all). Their
 * pending work is flushed and their graphs destroyed first (unless the driver is gone). */
void cg_stream_forget(CUstream h);
void cg_stream_forget_ctx(CUcontext ctx, enum cg_reason why);
/* The flusher: retire the per-thread streams of exited threads once nothing is deferred there. */
void cg_stream_reap(void);

/* Exit: submit pending work and destroy graphs everywhere, never waiting long for a lock. */
void cg_stream_exit_all(void);

/* Visit every live stream (report). */
void cg_stream_each(void (*fn)(struct cg_sstate *s, void *arg), void *arg);

#endif
