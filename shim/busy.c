/* Busy time as the union of intervals (busy.h): clip, sort by device and start, sweep. */
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
