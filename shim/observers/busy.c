/* Busy time as the union of intervals (busy.h): clip, sort by device and start, sweep; idle
 * time under host spans: both unions, then what of the host's the device's does not cover. */
#include "busy.h"

#include <stdlib.h>

static int by_device_then_start(const void *a, const void *b)
{
	const struct cg_span *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

uint64_t cg_busy_union(struct cg_span *s, size_t n, uint64_t t0, uint64_t t1, int *dev)
{
	*dev = -1;
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i].end <= t0 || s[i].start >= t1 || s[i].end <= s[i].start)
			continue;
		struct cg_span c = { s[i].dev, s[i].start < t0 ? t0 : s[i].start, s[i].end > t1 ? t1 : s[i].end };
		s[m++] = c;
	}
	qsort(s, m, sizeof(*s), by_device_then_start);
	uint64_t best = 0;
	for (size_t i = 0; i < m;) {
		uint32_t d = s[i].dev;
		uint64_t busy = 0, end = 0;
		for (; i < m && s[i].dev == d; i++)
			if (s[i].end > end) {  /* the part past everything merged so far */
				busy += s[i].end - (s[i].start > end ? s[i].start : end);
				end = s[i].end;
			}
		if (*dev < 0 || busy > best) {
			best = busy;
			*dev = (int)d;
		}
	}
	return best;
}

/* The spans of s[0, n) on `dev` (any where dev < 0), clipped to [t0, t1], merged into disjoint
 * spans in order at the front of s; returns how many. */
static size_t merged(struct cg_span *s, size_t n, int dev, uint64_t t0, uint64_t t1)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if ((dev >= 0 && s[i].dev != (uint32_t)dev) || s[i].end <= t0 || s[i].start >= t1 ||
		    s[i].end <= s[i].start)
			continue;
		struct cg_span c = { 0, s[i].start < t0 ? t0 : s[i].start, s[i].end > t1 ? t1 : s[i].end };
		s[m++] = c;
	}
	qsort(s, m, sizeof(*s), by_device_then_start);
	size_t k = 0;
	for (size_t i = 0; i < m; i++) {
		if (k > 0 && s[i].start <= s[k - 1].end) {
			if (s[i].end > s[k - 1].end)
				s[k - 1].end = s[i].end;
		} else {
			s[k++] = s[i];
		}
	}
	return k;
}

uint64_t cg_busy_idle_in(struct cg_span *gpu, size_t ng, struct cg_span *host, size_t nh, int dev,
                         uint64_t t0, uint64_t t1)
{
	size_t h = merged(host, nh, -1, t0, t1), g = dev >= 0 ? merged(gpu, ng, dev, t0, t1) : 0;
	uint64_t idle = 0;
	size_t j = 0;
	for (size_t i = 0; i < h; i++) {
		uint64_t covered = 0;
		while (j < g && gpu[j].end <= host[i].start)
			j++;
		for (size_t k = j; k < g && gpu[k].start < host[i].end; k++) {
			uint64_t lo = gpu[k].start > host[i].start ? gpu[k].start : host[i].start;
			uint64_t hi = gpu[k].end < host[i].end ? gpu[k].end : host[i].end;
			covered += hi - lo;
		}
		idle += host[i].end - host[i].start - covered;
	}
	return idle;
}
