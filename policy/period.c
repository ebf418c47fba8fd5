/* The program's iteration in its boundary-token sequence (period.h). One pass per candidate
 * period over prefix sums: O(n * max_period) comparisons, run once at exit by `cugraft profile`. */
#include "period.h"

#include <stdlib.h>

/* A stretch for one period: tokens t[lo, hi), `bad` disturbances of the pattern. */
struct stretch {
	size_t lo, hi, bad;
	uint64_t weight, per_iteration;  /* per_iteration: the launches of one period */
};

static uint64_t weight_of(const uint64_t *wsum, size_t lo, size_t hi)
{
	return wsum[hi] - wsum[lo];
}

/* The launches (weights) of t[lo, hi): a weight counts each token once more. */
static uint64_t launches_in(const uint64_t *wsum, size_t lo, size_t hi)
{
	return wsum[hi] - wsum[lo] - (hi - lo);
}

/* Phases before the loop can carry more launches than the loop does within the sequence kept:
 * compilation and autotuning repeat thousands of tiny benchmark launches, while a loop that
 * replays its own graphs makes few launch calls per step. What they lack is the end: the
 * program's loop is the phase that runs until it stops. So the loop is the last stretch (by
 * its end) that carries at least 1/LATEST_SHARE of the launches of the heaviest; the floor keeps
 * short phases after the loop (a final evaluation, reads of results, frees) from passing for
 * it. The rule picks among the stretches of one period, then among periods. */
enum { LATEST_SHARE = 8 };

/* The stretches of period p, in order, into segs (room for n / 3 + 1). A position i >= p is
 * bad when t[i] != t[i - p]. Bad positions denser than half of a window of 4p + 4 end a
 * stretch: one inserted token makes at most p + 1 of them in a row (each position then
 * compares against a shifted one), a changed one 2, so noise, even two disturbances close
 * together, does not, while a prologue or an epilogue of other tokens does. */
static size_t stretches(const uint32_t *t, size_t n, size_t p, const uint64_t *wsum,
                        uint32_t *badsum, struct stretch *segs)
{
	badsum[0] = 0;
	for (size_t i = 0; i < n; i++)
		badsum[i + 1] = badsum[i] + (i >= p && t[i] != t[i - p]);
	size_t count = 0, win = 4 * p + 4, seg = p;  /* the current stretch's positions start at seg */
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
			struct stretch s = { seg - p, end, badsum[end] - badsum[seg], 0, 0 };
			s.weight = weight_of(wsum, s.lo, s.hi);
			segs[count++] = s;
		}
		seg = i + 1;
	}
	return count;
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

/* Disturbances of period p among positions [lo, hi): runs of positions off the pattern, bad
 * positions less than a period apart being one run. A token inserted or changed once is one
 * disturbance, however long the period (it puts up to p + 1 positions off). */
static size_t disturbances(const uint32_t *t, size_t lo, size_t hi, size_t p)
{
	size_t runs = 0, last = 0;
	bool any = false;
	for (size_t i = lo; i < hi; i++)
		if (t[i] != t[i - p]) {
			runs += !any || i - last > p;
			last = i;
			any = true;
		}
	return runs;
}

/* Fixes the ends of stretch s of period p. They are known to within a window of noise: move
 * them out as far as the pattern holds exactly (the first period, compared against the
 * prologue, counted as off). Then a prologue or epilogue that repeats with this period too (a
 * run of frees after the loop) is trimmed: tokens the loop never makes, judged by the last
 * period that ends with a launch (launch-free reads and frees follow a loop; a prologue can
 * launch a lot, model initialisation does), and ends that launch too little. `set` has room
 * for p tokens. */
static struct stretch refine(const uint32_t *t, size_t n, size_t p, struct stretch s,
                             const uint64_t *wsum, const uint32_t *badsum, uint32_t *set)
{
	while (s.lo > 0 && t[s.lo - 1] == t[s.lo - 1 + p])
		s.lo--;
	while (s.hi < n && t[s.hi] == t[s.hi - p])
		s.hi++;
	size_t from = s.hi;  /* the reference: the last period that ends with a launch */
	while (from > s.lo + p && launches_in(wsum, from - 1, from) == 0)
		from--;
	from -= p;
	for (size_t k = 0; k < p; k++)
		set[k] = t[from + k];
	qsort(set, p, sizeof(*set), cmp_u32);
	while (s.lo < s.hi && !member(set, p, t[s.lo]))
		s.lo++;
	while (s.hi > s.lo && !member(set, p, t[s.hi - 1]))
		s.hi--;
	/* Copies of the loop's own launch-free tokens (reads of results after the loop) repeat
	 * with it too: an end whose last period carries less than half the launches of one
	 * iteration is not the loop. */
	uint64_t iteration = launches_in(wsum, from, from + p);
	while (s.hi - s.lo >= p && 2 * launches_in(wsum, s.lo, s.lo + p) < iteration)
		s.lo++;
	while (s.hi - s.lo >= p && 2 * launches_in(wsum, s.hi - p, s.hi) < iteration)
		s.hi--;
	if (s.hi - s.lo < 3 * p)
		return (struct stretch){ 0, 0, 0, 0, 0 };
	s.bad = disturbances(t, s.lo + p, s.hi, p);
	s.per_iteration = iteration;
	s.weight = weight_of(wsum, s.lo, s.hi);
	return s;
}

/* The loop's stretch of period p, by the rule above: the last stretch carrying the share of
 * the heaviest that is still a loop once its ends are fixed and not disturbed more than once
 * per 5 iterations. weight 0: none. */
static struct stretch loop_of_period(const uint32_t *t, size_t n, size_t p, const uint64_t *wsum,
                                     uint32_t *badsum, uint32_t *set, struct stretch *segs)
{
	size_t count = stretches(t, n, p, wsum, badsum, segs);
	uint64_t heaviest = 0;
	for (size_t k = 0; k < count; k++)
		if (segs[k].weight > heaviest)
			heaviest = segs[k].weight;
	for (size_t k = count; k-- > 0;) {
		if (segs[k].weight * LATEST_SHARE < heaviest)
			continue;
		struct stretch s = refine(t, n, p, segs[k], wsum, badsum, set);
		if (s.weight && s.bad * 5 <= (s.hi - s.lo) / p)
			return s;
	}
	return (struct stretch){ 0, 0, 0, 0, 0 };
}

/* Whether stretches a and b cover mostly the same tokens (half of the shorter one): the same
 * loop seen with two periods (twice the period fits as well as the period itself). */
static bool same_part(const struct stretch *a, const struct stretch *b)
{
	size_t lo = a->lo > b->lo ? a->lo : b->lo, hi = a->hi < b->hi ? a->hi : b->hi;
	size_t shorter = a->hi - a->lo < b->hi - b->lo ? a->hi - a->lo : b->hi - b->lo;
	return hi > lo && 2 * (hi - lo) >= shorter;
}

/* The loop among the candidate stretches (cand[p].weight == 0: none of period p), by the rule
 * above. Among the stretches covering the same part of the sequence, the smallest period wins
 * that carries nearly the most launches (twice the period fits as well as the period itself),
 * or that divides the period of the one carrying the most and carries half as much: a
 * multiple of the loop's period tolerates longer runs of noise, so its stretch reaches further
 * into the tokens around the loop. Returns 0 when there is none. */
static size_t pick(const struct stretch *cand, size_t max_period, uint64_t heaviest_weight)
{
	const struct stretch *last = NULL;
	for (size_t p = 1; p <= max_period; p++)
		if (cand[p].weight && cand[p].weight * LATEST_SHARE >= heaviest_weight &&
		    (!last || cand[p].hi > last->hi))
			last = &cand[p];
	if (!last)
		return 0;
	size_t most = 0;
	for (size_t p = 1; p <= max_period; p++)
		if (cand[p].weight && same_part(&cand[p], last) &&
		    (!most || cand[p].weight > cand[most].weight))
			most = p;
	for (size_t p = 1; p <= max_period; p++) {
		if (!cand[p].weight || !same_part(&cand[p], last))
			continue;
		if (cand[p].weight * 10 >= cand[most].weight * 9 ||
		    (most % p == 0 && cand[p].weight * 2 >= cand[most].weight))
			return p;
	}
	return 0;
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
	struct stretch *segs = malloc((n / 3 + 1) * sizeof(*segs));
	bool found = false;
	if (!wsum || !badsum || !set || !cand || !segs)
		goto done;
	wsum[0] = 0;
	for (size_t i = 0; i < n; i++)  /* +1: a token counts even with no launch before it */
		wsum[i + 1] = wsum[i] + (weight ? weight[i] : 0) + 1;

	uint64_t heaviest_weight = 0;
	for (size_t p = 1; p <= max_period; p++) {
		struct stretch s = loop_of_period(t, n, p, wsum, badsum, set, segs);
		if (s.weight == 0)
			continue;
		cand[p] = s;
		if (s.weight > heaviest_weight)
			heaviest_weight = s.weight;
	}
	size_t p = pick(cand, max_period, heaviest_weight);
	if (p == 0)
		goto done;
	/* Inserted tokens make the stretch longer than its iterations: count them by launches
	 * where the loop launches (rounded: a changed launch count is noise too). */
	const struct stretch *s = &cand[p];
	uint64_t launches = launches_in(wsum, s->lo, s->hi);
	out->period = p;
	out->first = s->lo;
	out->tokens = s->hi - s->lo;
	out->iterations = s->per_iteration ?
	                  (size_t)((launches + s->per_iteration / 2) / s->per_iteration) :
	                  out->tokens / p;
	out->disturbances = s->bad;
	found = true;
done:
	free(wsum);
	free(badsum);
	free(set);
	free(cand);
	free(segs);
	return found;
}
