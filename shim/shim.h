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
	bool auditing;             /* CUGRAFT_AUDIT: forwarded calls mark themselves (cg_tl_forwarding) */
	atomic_int deferred_error; /* a CUresult: the eager submission of work the program had been
	                              told was submitted failed; the next synchronising call says so */
};
extern struct cg_shim cg_shim;

/* This thread's state, all of it (shim.c defines it):
 * Depth of shim-internal driver calls (backend) and NCCL calls on this thread: launches made
 * there are not the program's and pass through untouched. */
extern _Thread_local int cg_tl_internal;
/* The entry point the program is in on this thread (for the report's fallback events). */
extern _Thread_local const char *cg_tl_api;
/* Set while a shim wrapper (or the backend) forwards to the driver on this thread (audit.h). */
extern _Thread_local int cg_tl_forwarding;
/* Set by a default-deny trampoline for the one driver call it is about to make (audit.h). */
extern _Thread_local int cg_tl_deny_armed;
/* This thread's number: never reused (pthread_t values are, so a thread started after another
 * exited would take over the dead thread's per-thread stream record and its pending work). */
uint64_t cg_thread_uid(void);

/* What keeps the process from being settled, the one word a forwarded boundary reads
 * (boundary.c): while it is zero, such a call would change nothing anywhere, so it is counted
 * and forwarded, no stream looked up, no lock taken. The low bits count program streams not
 * quiet (stream.c: work deferred, or ops since their last boundary), per-thread streams'
 * hand-backs their threads have yet to catch up with (ptds.h) and cost-gate samples in flight
 * (timing.c, read at boundaries); the high bits are states in which every boundary takes the
 * full path. A count that settles is decremented only after what it leaves unsettled was
 * counted, so the word never reads zero in between. */
enum {
	CG_UNSETTLED_STARTING = 1 << 27, /* the shim is not ready (start-up, or no driver) */
	CG_UNSETTLED_DISABLED = 1 << 28, /* disabled, or a fork() child: plain forwarding */
	CG_UNSETTLED_AUDIT = 1 << 29,    /* forwarded calls mark themselves (cg_tl_forwarding) */
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
	return cg_tl_internal > 0 || atomic_load_explicit(&cg_shim.disabled, memory_order_relaxed);
}

#endif
