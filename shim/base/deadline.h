/* Absolute CLOCK_REALTIME deadlines, as pthread_cond_timedwait and pthread_mutex_timedlock
 * want them. */
#ifndef CG_SHIM_DEADLINE_H
#define CG_SHIM_DEADLINE_H

#include <time.h>

static inline struct timespec cg_deadline_ms(long ms)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

#endif
