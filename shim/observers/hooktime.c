/* Sampled host time in the launch wrappers (hooktime.h). */
#include <stdatomic.h>

#include "policy/clock.h"
#include "shim/observers/hooktime.h"

/* Weighted sums over the sampled calls: ns times calls stood for, and the calls. */
static _Atomic uint64_t weighted_ns, weighted_calls;
/* The same over the sampled calls' forwards to the driver. */
static _Atomic uint64_t forward_ns, forward_calls;
/* The waits: ns and calls, every one. */
static _Atomic uint64_t wait_ns, wait_calls;

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
	uint64_t t0 = cg_monotonic_ns();
	return t0 ? t0 : 1;
}

void cg_hooktime_stop(uint64_t t0)
{
	uint64_t now = cg_monotonic_ns();
	uint64_t w = cg_tls.hooktime.weight;
	atomic_fetch_add_explicit(&weighted_ns, (now > t0 ? now - t0 : 0) * w, memory_order_relaxed);
	atomic_fetch_add_explicit(&weighted_calls, w, memory_order_relaxed);
}

void cg_hooktime_total(uint64_t *ns, uint64_t *calls)
{
	*ns = atomic_load_explicit(&weighted_ns, memory_order_relaxed);
	*calls = atomic_load_explicit(&weighted_calls, memory_order_relaxed);
}

void cg_hooktime_forwarded(uint64_t f0)
{
	uint64_t now = cg_monotonic_ns();
	uint64_t w = cg_tls.hooktime.weight;
	atomic_fetch_add_explicit(&forward_ns, (now > f0 ? now - f0 : 0) * w, memory_order_relaxed);
	atomic_fetch_add_explicit(&forward_calls, w, memory_order_relaxed);
}

void cg_hooktime_forwards(uint64_t *ns, uint64_t *calls)
{
	*ns = atomic_load_explicit(&forward_ns, memory_order_relaxed);
	*calls = atomic_load_explicit(&forward_calls, memory_order_relaxed);
}

void cg_hooktime_waited(uint64_t t0)
{
	uint64_t now = cg_monotonic_ns();
	atomic_fetch_add_explicit(&wait_ns, now > t0 ? now - t0 : 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&wait_calls, 1, memory_order_relaxed);
}

void cg_hooktime_waits(uint64_t *ns, uint64_t *calls)
{
	*ns = atomic_load_explicit(&wait_ns, memory_order_relaxed);
	*calls = atomic_load_explicit(&wait_calls, memory_order_relaxed);
}
