/* Process-wide shim state (start-up, pass-through decisions, exit) and this thread's: the
 * bottom of the shim, read by every layer above. */
#ifndef CG_SHIM_SHIM_H
#define CG_SHIM_SHIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy/engine.h"

struct cg_shim {
	atomic_bool disabled;      /* CUGRAFT_DISABLE, or the driver could not be loaded */
	atomic_bool exiting;       /* exit work has started: no more deferral */
	atomic_bool driver_gone;   /* after exit work: never call the driver again */
	atomic_int captures;       /* program stream captures in progress */
	atomic_bool flusher_idle;  /* the flusher sleeps until woken (nothing was pending) */
	void (*wake_flusher)(void); /* wakes it: set before it starts, so whoever sees it idle may call */
	_Atomic uint64_t flusher_wakeups; /* rounds of the flusher (the report's summary) */
	bool flusher_running;
	struct cg_engine *engine;
	uint32_t max_defer_us;
	bool record_only;
	bool auditing;             /* CUGRAFT_AUDIT: forwarded calls mark themselves (cg_tls.forwarding) */
	atomic_int deferred_error; /* a CUresult: the eager submission of work the program had been
	                              told was submitted failed; the next synchronising call says so */
};
extern struct cg_shim cg_shim;

/* This thread's state, all of it, in one block (shim.c defines it), as uftrace keeps its
 * mcount_thread_data. Zero in a new thread; a fork() child keeps the forking thread's. In the
 * static TLS block (initial-exec, also where a file is built without -ftls-model): each access is
 * one load off the thread pointer, never __tls_get_addr, which may allocate and is a good part of
 * a forwarded call's cost. Each part names the one file that writes it; the base knows no driver
 * type nor any type of a layer above it, so their handles are untyped pointers here, typed by
 * that file. (The log's re-entry guard stays in log.c: the support library is also linked by the
 * `cugraft` command and unit tests, which have no shim.) */
#define CG_TLS_STREAM_WAYS 8  /* registry.c: streams this thread looked up last */
#define CG_TLS_GROUP_STREAMS 8 /* nccl_hooks.c: streams of collectives in an open NCCL group */
struct cg_tls {
	/* Depth of shim-internal driver calls (backend) and NCCL calls: launches made there are
	 * not the program's and pass through untouched. */
	int internal;
	/* Set while a shim wrapper (or the backend) forwards to the driver (audit.h). */
	int forwarding;
	/* Set by a default-deny trampoline for the one driver call it is about to make (audit.h). */
	int deny_armed;
	/* driver.c: this thread is starting the shim: its own driver calls pass through. */
	bool in_init;
	/* counts.c: released its counter block at exit, or found none: counts in the shared one. */
	bool counts_shared;
	/* The entry point the program is in (for the report's fallback events). */
	const char *api;
	/* cg_thread_uid; 0 until first asked. */
	uint64_t uid;
	/* counts.c: this thread's counter block (struct cg_counts), NULL until its first count. */
	void *counts;
	/* registry.c: the stream records (struct cg_sstate) this thread looked up last, keyed by
	 * handle (CUstream), context (CUcontext) and the registry's generation. */
	struct { void *h, *ctx, *s; unsigned gen; } streams[CG_TLS_STREAM_WAYS];
	/* layout.c: the latest layout (struct cg_layout) asked for, by its table and function. */
	struct { const void *table, *f, *layout; } layout;
	/* nvtx.c: whether this engine call pushed a flush range, the ops the backend submitted
	 * eagerly in it, and the content of the graph being built. */
	struct { bool range; uint32_t eager; uint64_t built; } nvtx;
	/* cuda_backend.c: the host time of this thread's latest graph build and of capturing its
	 * ops (ns), for its graph_built record (events.c). */
	struct { uint64_t ns, capture_ns; } build;
	/* nccl_hooks.c: the NCCL group depth, and the streams (CUstream) of the group's collectives:
	 * n of them; CG_TLS_GROUP_STREAMS + 1: more than fit, the group's end submits every stream. */
	struct { int depth, n; void *s[CG_TLS_GROUP_STREAMS]; } nccl_group;
	/* hooktime.c: launch wrapper calls until the next timed one, the calls the one being timed
	 * stands for, and the state of the random distances; cuda_backend.c: this thread's host
	 * time in the graph API so far (builds, patches, graph launches), and its value when the
	 * timed call began; the host time and ops of the deferred or held ops it submitted
	 * eagerly so far (a divergence, a flush), and their values when the timed call began;
	 * the deferred work it submitted so far (ops run eagerly, graph launches), which a wait
	 * compares before and after. */
	struct { uint32_t left, weight; uint64_t rng, replay_ns, replay_at, flush_ns, flush_at,
	         flush_ops, flush_ops_at, submits; } hooktime;
};
extern _Thread_local struct cg_tls cg_tls __attribute__((tls_model("initial-exec")));
/* This thread's number: never reused (pthread_t values are, so a thread started after another
 * exited would take over the dead thread's per-thread stream record and its pending work). */
uint64_t cg_thread_uid(void);

/* What keeps the process from being settled, the one word a forwarded boundary reads
 * (boundary.c): while it is zero, such a call would change nothing anywhere, so it is counted
 * and forwarded, no stream looked up, no lock taken. The low bits count program streams not
 * quiet (registry.c: work deferred, or ops since their last boundary), per-thread streams'
 * hand-backs their threads have yet to catch up with (ptds.h) and cost-gate samples in flight
 * (timing.c, read at boundaries); the high bits are states in which every boundary takes the
 * full path. A count that settles is decremented only after what it leaves unsettled was
 * counted, so the word never reads zero in between. */
enum {
	CG_UNSETTLED_STARTING = 1 << 27, /* the shim is not ready (start-up, or no driver) */
	CG_UNSETTLED_DISABLED = 1 << 28, /* disabled, or a fork() child: plain forwarding */
	CG_UNSETTLED_AUDIT = 1 << 29,    /* forwarded calls mark themselves (cg_tls.forwarding) */
	CG_UNSETTLED_PROFILE = 1 << 30,  /* boundaries are tokens of the profile (floor.h) */
};
extern atomic_uint cg_unsettled;

static inline bool cg_shim_disabled(void)
{
	return atomic_load_explicit(&cg_shim.disabled, memory_order_relaxed);
}

static inline void cg_shim_disable(void)
{
	atomic_store(&cg_shim.disabled, true);
	atomic_fetch_or(&cg_unsettled, CG_UNSETTLED_DISABLED);
}

/* What a synchronising call (a sync, a stream query) returns, its own result `r` given: r where
 * it failed, else the error of deferred work that failed since, once, as CUDA reports an
 * asynchronous error at the next call that can. */
static inline int cg_shim_deferred_error(int r)
{
	if (r != 0 || !atomic_load_explicit(&cg_shim.deferred_error, memory_order_relaxed))
		return r;
	return atomic_exchange(&cg_shim.deferred_error, 0);
}

/* True when a program call must go straight to the driver with nothing else done. */
static inline bool cg_shim_passthrough(void)
{
	return cg_tls.internal > 0 || atomic_load_explicit(&cg_shim.disabled, memory_order_relaxed);
}

#endif
