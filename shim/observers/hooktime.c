/* Sampled host time in the launch wrappers (hooktime.h). */
#include <stdatomic.h>

#include "policy/clock.h"
#include "shim/observers/hooktime.h"

/* A sum of host time (ns) and the calls it stands for: over the sampled launch calls and their
 * forwards, weighted by the calls each sample stands for; over the waits, every one. */
struct tally {
	_Atomic uint64_t ns, calls;
};
static struct tally launch_calls, forwards, waits, flushing_waits;
/* The sampled launch calls' time in the graph API, and in the deferred ops they submitted
 * eagerly, and those ops, weighted alike (their calls are launch_calls'). */
static _Atomic uint64_t replay_ns, flush_ns, flush_ops;

/* Adds ns, standing for `calls` calls. */
static void tally_add(struct tally *t, uint64_t ns, uint64_t calls)
{
	atomic_fetch_add_explicit(&t->ns, ns * calls, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->calls, calls, memory_order_relaxed);
}

/* The time from t0 to now. */
static uint64_t since(uint64_t t0)
{
	uint64_t now = cg_monotonic_ns();
	return now > t0 ? now - t0 : 0;
}

static void tally_read(struct tally *t, uint64_t *ns, uint64_t *calls)
{
	*ns = atomic_load_explicit(&t->ns, memory_order_relaxed);
	*calls = atomic_load_explicit(&t->calls, memory_order_relaxed);
}

/* The next distance, 1 .. 2 * CG_HOOKTIME_EVERY - 1 calls (xorshift, seeded per thread). */
static uint32_t next_distance(void)
{
	uint64_t x = cg_tls.hooktime.rng;
	if (!x)
		x = (uint64_t)(uintptr_t)&cg_tls ^ 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	cg_tls.hooktime.rng = x;
	return 1 + (uint32_t)(x % (2 * CG_HOOKTIME_EVERY - 1));
}

uint64_t cg_hooktime_start(void)
{
	/* This call stands for itself and the calls until the next sample. */
	uint32_t d = next_distance();
	cg_tls.hooktime.left = d;
	cg_tls.hooktime.weight = d;
	cg_tls.hooktime.replay_at = cg_tls.hooktime.replay_ns;
	cg_tls.hooktime.flush_at = cg_tls.hooktime.flush_ns;
	cg_tls.hooktime.flush_ops_at = cg_tls.hooktime.flush_ops;
	uint64_t t0 = cg_monotonic_ns();
	return t0 ? t0 : 1;
}

/* What this thread's `now` gained since `at`, weighted like the sampled call, into `sum`. */
static void weigh(_Atomic uint64_t *sum, uint64_t now, uint64_t at)
{
	atomic_fetch_add_explicit(sum, (now - at) * cg_tls.hooktime.weight, memory_order_relaxed);
}

void cg_hooktime_stop(uint64_t t0)
{
	tally_add(&launch_calls, since(t0), cg_tls.hooktime.weight);
	weigh(&replay_ns, cg_tls.hooktime.replay_ns, cg_tls.hooktime.replay_at);
	weigh(&flush_ns, cg_tls.hooktime.flush_ns, cg_tls.hooktime.flush_at);
	weigh(&flush_ops, cg_tls.hooktime.flush_ops, cg_tls.hooktime.flush_ops_at);
}

void cg_hooktime_total(uint64_t *ns, uint64_t *calls)
{
	tally_read(&launch_calls, ns, calls);
}

void cg_hooktime_forwarded(uint64_t f0)
{
	tally_add(&forwards, since(f0), cg_tls.hooktime.weight);
}

void cg_hooktime_forwards(uint64_t *ns, uint64_t *calls)
{
	tally_read(&forwards, ns, calls);
}

void cg_hooktime_replays(uint64_t *ns)
{
	*ns = atomic_load_explicit(&replay_ns, memory_order_relaxed);
}

void cg_hooktime_flushes(uint64_t *ns, uint64_t *ops)
{
	*ns = atomic_load_explicit(&flush_ns, memory_order_relaxed);
	*ops = atomic_load_explicit(&flush_ops, memory_order_relaxed);
}

void cg_hooktime_waited(uint64_t t0, bool flushed)
{
	uint64_t ns = since(t0);
	tally_add(&waits, ns, 1);
	if (flushed)
		tally_add(&flushing_waits, ns, 1);
}

void cg_hooktime_waits(uint64_t *ns, uint64_t *calls)
{
	tally_read(&waits, ns, calls);
}

void cg_hooktime_flushing_waits(uint64_t *ns, uint64_t *calls)
{
	tally_read(&flushing_waits, ns, calls);
}
