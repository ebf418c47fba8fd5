/* The program's iteration in its boundary-token sequence (period.h). One pass per candidate
 * period over prefix sums: O(n * max_period) comparisons, run once at exit by `cugraft profile`. */
#include "period.h"

#include <stdlib.h>

/* A stretch for one period: tokens t[lo, hi), `bad` positions off the pattern. */
struct stretch {
	size_t lo, hi, bad;
	uint64_t weight;
};

static uint64_t weight_of(const uint64_t *wsum, size_t lo, size_t hi)
{
	return wsum[hi] - wsum[lo];
}

/* The heaviest stretch of period p. A position i >= p is bad when t[i] != t[i - p]. Bad
 * positions denser than half of a window of 4p + 4 end a stretch: one inserted token makes at
 * most p + 1 of them in a row (each position then compares against a shifted one), a changed
 * one 2, so noise, even two disturbances close together, does not, while a prologue or an
 * epilogue of other tokens does. */
static struct stretch heaviest(const uint32_t *t, size_t n, size_t p, const uint64_t *wsum,
                               uint32_t *badsum)
{
	badsum[0] = 0;
	for (size_t i = 0; i < n; i++)
		badsum[i + 1] = badsum[i] + (i >= p && t[i] != t[i - p]);
	struct stretch best = { 0, 0, 0, 0 };
	size_t win = 4 * p + 4, seg = p;  /* the current stretch's positions start at seg */
	for (size_t i = p; i <= n; i++) {
		bool dense = false;
		if (i < n && i + 1 >= p + win) {
			size_t lo = i + 1 - win;
			dense = 2 * (badsum[i + 1] - badsum[lo]) > win;
		}
		if (!dense && i < n)
			continue;
		/* The stretch ends where the dense window starts (or at the end). */
		size_t end = i < n ? i + 1 - win : n;
		if (end > seg && end - seg + p >= 3 * p) {
			struct stretch s = { seg - p, end, badsum[end] - badsum[seg], 0 };
			s.weight = weight_of(wsum, s.lo, s.hi);
			if (s.weight > best.weight)
				best = s;
		}
		seg = i + 1;
	}
	return best;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static bool member(const uint32_t *set, size_t n, uint32_t v)
{
	return bsearch(&v, set, n, sizeof(*set), cmp_u32) != NULL;
}

/* Fixes the ends of stretch s of period p. They are known to within a window of noise: move
 * them out as far as the pattern holds exactly (the first period, compared against the
 * prologue, counted as off). Then a prologue or epilogue that repeats with this period too (a
 * run of frees after the loop) is trimmed: tokens the loop never makes, judged by the period
 * around the stretch's middle launch. `set` has room for p tokens. */
static struct stretch refine(const uint32_t *t, size_t n, size_t p, struct stretch s,
                             const uint64_t *wsum, const uint32_t *badsum, uint32_t *set)
{
	while (s.lo > 0 && t[s.lo - 1] == t[s.lo - 1 + p])
		s.lo--;
	while (s.hi < n && t[s.hi] == t[s.hi - p])
		s.hi++;
	size_t mid = s.lo;
	uint64_t half = wsum[s.lo] + weight_of(wsum, s.lo, s.hi) / 2;
	while (mid + 1 < s.hi && wsum[mid + 1] < half)
		mid++;
	size_t from = mid >= s.lo + p / 2 ? mid - p / 2 : s.lo;
	if (from + p > s.hi)
		from = s.hi - p;
	for (size_t k = 0; k < p; k++)
		set[k] = t[from + k];
	qsort(set, p, sizeof(*set), cmp_u32);
	while (s.lo < s.hi && !member(set, p, t[s.lo]))
		s.lo++;
	while (s.hi > s.lo && !member(set, p, t[s.hi - 1]))
		s.hi--;
	if (s.hi - s.lo < 3 * p)
		return (struct stretch){ 0, 0, 0, 0 };
	s.bad = badsum[s.hi] - badsum[s.lo + p];
	s.weight = weight_of(wsum, s.lo, s.hi);
	return s;
}

bool cg_period_find(const uint32_t *t, const uint32_t *weight, size_t n, size_t max_period,
                    struct cg_period *out)
{
	if (n < 3 || max_period == 0)
		return false;
	if (max_period > n / 3)
		max_period = n / 3;
	uint64_t *wsum = malloc((n + 1) * sizeof(*wsum));
	uint32_t *badsum = malloc((n + 1) * sizeof(*badsum));
	uint32_t *set = malloc(max_period * sizeof(*set));
	struct stretch *cand = calloc(max_period + 1, sizeof(*cand));
	bool found = false;
	if (!wsum || !badsum || !set || !cand)
		goto done;
	wsum[0] = 0;
	for (size_t i = 0; i < n; i++)  /* +1: a token counts even with no launch before it */
		wsum[i + 1] = wsum[i] + (weight ? weight[i] : 0) + 1;

	uint64_t heaviest_weight = 0;
	for (size_t p = 1; p <= max_period; p++) {
		struct stretch s = heaviest(t, n, p, wsum, badsum);
		if (s.weight == 0)
			continue;
		s = refine(t, n, p, s, wsum, badsum, set);
		if (s.weight == 0 || s.bad * 20 > s.hi - s.lo - p)  /* more than 5% off the pattern */
			continue;
		cand[p] = s;
		if (s.weight > heaviest_weight)
			heaviest_weight = s.weight;
	}
	size_t p = 1;
	while (p <= max_period && !(cand[p].weight && cand[p].weight * 10 >= heaviest_weight * 9))
		p++;
	if (p > max_period)
		goto done;
	/* Whole iterations, ending with the stretch: the latest ones are the steady state. */
	const struct stretch *s = &cand[p];
	out->period = p;
	out->iterations = (s->hi - s->lo) / p;
	out->first = s->hi - out->iterations * p;
	out->mismatches = 0;
	for (size_t i = out->first + p; i < s->hi; i++)
		out->mismatches += t[i] != t[i - p];
	found = true;
done:
	free(wsum);
	free(badsum);
	free(set);
	free(cand);
	return found;
}
