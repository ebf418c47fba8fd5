/* The program's host time inside cugraft's wrappers. Its launch calls (kernel launches, async
 * memsets and device copies), sampled: about one call in CG_HOOKTIME_EVERY, at random distances
 * so that no loop's period lines up with them, is timed from the wrapper's entry to its return
 * and stands for the calls up to the next sample. Set beside what the eager program's launch
 * calls take (`cugraft profile`), it is what cugraft costs or saves the program per launch call,
 * everything in: packing and matching the op, deferring it, the graph launches, patches and
 * builds it triggers, the forward of the ops it passes. Written as the summary's
 * launch_call_us. Of a sampled call that cugraft forwarded (an op run eagerly, learned or
 * passed), the forward alone is timed too: the driver's share, launch_forward_us; and the host
 * time its replays took in the graph API (builds, patches, graph launches: launch_replay_us);
 * and the driver's time in the deferred (or held) ops such a call submitted eagerly, where the
 * program's op ended their deferral without its graph (a divergence, a cost-gate sample:
 * launch_flush_us over launch_flush_ops); what is left of launch_call_us is cugraft's own
 * work. And its waits (syncs and copies to or from the host, the calls after which the host has seen the GPU's work),
 * every one: what they take beside the eager program's is what deferring the work exposed to a
 * waiting host, the flush of that work in. Written as wait_call_us. */
#ifndef CG_SHIM_HOOKTIME_H
#define CG_SHIM_HOOKTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/clock.h"
#include "shim/base/shim.h"

#define CG_HOOKTIME_EVERY 16

/* Out of line: a sampled call's start (never 0), and its end. */
uint64_t cg_hooktime_start(void);
void cg_hooktime_stop(uint64_t t0);

/* At a wrapper's entry: 0, or the time of a sampled call's start (a TLS decrement and a branch
 * for the others). */
static inline uint64_t cg_hooktime_begin(void)
{
	if (cg_tls.hooktime.left > 1) {
		cg_tls.hooktime.left--;
		return 0;
	}
	return cg_hooktime_start();
}

/* At its return: `t0` from cg_hooktime_begin (0: not sampled). */
static inline void cg_hooktime_end(uint64_t t0)
{
	if (t0)
		cg_hooktime_stop(t0);
}

/* The estimated host time in the wrappers (ns) and calls they stand for, every thread's. */
void cg_hooktime_total(uint64_t *ns, uint64_t *calls);

/* The sampled call being timed forwarded the program's call, from f0 (cg_monotonic_ns) until
 * now; and the estimated host time in those forwards (ns) and the calls they stand for. */
void cg_hooktime_forwarded(uint64_t f0);
void cg_hooktime_forwards(uint64_t *ns, uint64_t *calls);
/* The estimated host time the sampled calls spent in the graph API (the backend's builds,
 * patches and graph launches, cg_tls.hooktime.replay_ns), weighted alike. */
void cg_hooktime_replays(uint64_t *ns);
/* The estimated host time the sampled calls spent submitting deferred or held ops eagerly
 * (cg_tls.hooktime.flush_ns) and those ops, weighted alike. */
void cg_hooktime_flushes(uint64_t *ns, uint64_t *ops);

/* `call`, forwarded to the driver: timed where the wrapper's call is sampled (t0 not 0). */
#define CG_HOOKTIME_FORWARD(t0, call)                                                           \
	((t0) ? ({ uint64_t f0_ = cg_monotonic_ns(); CUresult hr_ = (call);                     \
	           cg_hooktime_forwarded(f0_); hr_; })                                           \
	      : (call))

/* A wait of the program began at t0 (cg_monotonic_ns) and ends now; `flushed`: it submitted
 * work deferred before it (cg_tls.hooktime.submits moved), whose GPU time it then waited for
 * from the start. Every thread's so far: all waits, and those that flushed. */
void cg_hooktime_waited(uint64_t t0, bool flushed);
void cg_hooktime_waits(uint64_t *ns, uint64_t *calls);
void cg_hooktime_flushing_waits(uint64_t *ns, uint64_t *calls);

#endif
