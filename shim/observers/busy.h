/* The busy time of a set of time intervals per device: their union, clipped to a window; and
 * the time the host spent in launch calls while a device was idle. Pure C (no CUPTI, no
 * driver), so the CPU tests check it; activity.c feeds it CUPTI's records. */
#ifndef CG_SHIM_BUSY_H
#define CG_SHIM_BUSY_H

#include <stddef.h>
#include <stdint.h>

struct cg_span {
	uint32_t dev;
	uint64_t start, end;
};

/* The busiest device's busy time within [t0, t1]: the length of the union of its spans
 * (overlapping kernels of concurrent streams count once) clipped to the window; its ordinal in
 * *dev (-1: no span in the window). Reorders s. */
uint64_t cg_busy_union(struct cg_span *s, size_t n, uint64_t t0, uint64_t t1, int *dev);

/* The time within [t0, t1] that some host span covers while device `dev` is idle: the union of
 * the host spans (their dev ignored; overlapping ones count once) less the union of that
 * device's spans. dev < 0: every host span's time. Reorders both. */
uint64_t cg_busy_idle_in(struct cg_span *gpu, size_t ng, struct cg_span *host, size_t nh, int dev,
                         uint64_t t0, uint64_t t1);

#endif
