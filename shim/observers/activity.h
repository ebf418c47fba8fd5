/* GPU busy time from CUPTI activity records, for profile mode (floor.h): kernels (concurrent
 * ones too; a graph's kernel nodes one by one), memsets and memcpys, kept as time intervals per
 * device. CUPTI is loaded with dlopen; the activity API needs no subscriber, so it runs beside
 * the audit's callbacks. Without CUPTI (or without its headers at build time) it is unavailable
 * and says why. */
#ifndef CG_SHIM_ACTIVITY_H
#define CG_SHIM_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t (*cg_clock_fn)(void);

/* Starts collecting. `ours` is offered to CUPTI as its timestamp source; *clock receives the
 * clock the records' times are in (ours, or CUPTI's own if it refused). false: unavailable,
 * *why says why. */
bool cg_activity_start(cg_clock_fn ours, cg_clock_fn *clock, const char **why);
/* Stops and restarts the kernel records, so that launch calls can be timed without them
 * (floor.c): the kernels launched in between are not recorded. false: it cannot pause;
 * or, resuming, CUPTI refused, and activity is off for good (cg_activity_running). */
bool cg_activity_pause(void);
bool cg_activity_resume(void);
bool cg_activity_running(void);
/* Delivers every buffered record (exit work). */
void cg_activity_flush(void);

struct cg_activity_stats {
	uint64_t records;        /* kernel, memcpy and memset records received */
	uint64_t dropped;        /* records CUPTI reported lost */
	uint64_t complete_from;  /* every interval ending after this time is kept (older ones
	                          * were overwritten when the ring was full) */
};
void cg_activity_stats(struct cg_activity_stats *st);
/* The busiest device's busy time (the union of its intervals) within [t0, t1], in the clock's
 * ns; its ordinal in *dev (-1: no interval there). */
uint64_t cg_activity_busy(uint64_t t0, uint64_t t1, int *dev);
struct cg_span;
/* The time within [t0, t1] that the host spans (launch calls) cover while device `dev` has no
 * interval open (busy.h); reorders host. */
uint64_t cg_activity_idle_in(struct cg_span *host, size_t nh, uint64_t t0, uint64_t t1, int dev);

#endif
