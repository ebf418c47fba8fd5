/* The monotonic clock of the engine and the shim: deferral ages, the flusher's deadlines,
 * profile mode's launch times and the report's timestamps are all read from it, so they can be
 * compared. The engine's tests replace it (cg_engine_set_clock); the shim never does. */
#ifndef CG_POLICY_CLOCK_H
#define CG_POLICY_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t cg_monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
