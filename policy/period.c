/* The program's step in the sequence of its launches and boundaries (period.h). Candidate
 * periods are the distances at which stretches of 8 events recur (every period, for a short
 * sequence); each is checked over the whole sequence in O(n), once at exit by `cugraft
 * profile`. */
#include "period.h"

#include <stdlib.h>

#include "mix.h"

enum {
	LATEST_SHARE = 8,    /* a later phase, or a loop taking turns with the heaviest, from 1/8 */
	NOISE_EVERY = 5,     /* at most one launching insertion or deletion per 5 iterations */
	NOISE_LAUNCHES = 2,  /* a disturbance carrying at most 2 launches more or less is noise, */
	NOISE_SHARE = 16,    /* or at most a 16th of one iteration's */
	KGRAM = 8,           /* events hashed together to find where the sequence recurs */
	CANDIDATES = 48,     /* the most frequent recurrence distances tried */
	EDIT = 8,            /* the alignment's longest insertion, deletion or change */
	CONFIRM = 3,         /* events that must match after an edit */
};
/* Up to n * max_period comparisons of this many, every period is tried. */
static const uint64_t EXHAUSTIVE = 1ull << 25;

/* The sequence and the scratch space the search shares. */
struct seq {
	const uint32_t *t;
	size_t n;
	uint64_t *msum;    /* prefix sums of each event's mass: its launches + 1 */
	uint32_t *badsum;  /* prefix counts of positions i >= p with t[i] != t[i - p] */
	uint32_t *set;     /* room for max_period events */
	uint32_t *ref, *ref_launches;  /* the alignment's reference iteration (max_period) */
	struct stretch *segs;
};

/* A stretch for one period: events t[lo, hi). */
struct stretch {
	size_t lo, hi;
	uint64_t weight, per_iteration;  /* per_iteration: the launches of one period */
};

/* A pattern's stretch, aligned: `iterations` whole iterations in [first, end), the last from
 * `last`; what its matched events weigh; the sorted events of one iteration, hashed (`sig`),
 * names the pattern across stretches. */
struct loop {
	size_t p, first, end, last, iterations, clusters;
	uint64_t mass, launches, per, sig;
};

struct loops {
	struct loop *v;
	size_t n, cap;
	bool failed;
};

static uint64_t weight_of(const uint64_t *msum, size_t lo, size_t hi)
{
	return msum[hi] - msum[lo];
}

/* The launches (weights) of t[lo, hi): the mass counts each event once more. */
static uint64_t launches_in(const uint64_t *msum, size_t lo, size_t hi)
{
	return msum[hi] - msum[lo] - (hi - lo);
}

static uint64_t noise_launches(uint64_t per)
{
	return per / NOISE_SHARE > NOISE_LAUNCHES ? per / NOISE_SHARE : NOISE_LAUNCHES;
}

/* The stretches of period p, in order, into segs (room for n / 3 + 1). A position i >= p is
 * bad when t[i] != t[i - p]. Bad positions denser than half of a window of 4p + 4 end a
 * stretch: one inserted event makes at most p + 1 of them in a row (each position then
 * compares against a shifted one), a changed one 2, so noise, even two disturbances close
 * together, does not, while a prologue or an epilogue of other events does. */
static size_t stretches(const struct seq *q, size_t p)
{
	const uint32_t *t = q->t;
	size_t n = q->n;
	uint32_t *badsum = q->badsum;
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
			struct stretch s = { seg - p, end, 0, 0 };
			s.weight = weight_of(q->msum, s.lo, s.hi);
			q->segs[count++] = s;
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

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	return x < y ? -1 : x > y;
}

static bool member(const uint32_t *set, size_t n, uint32_t v)
{
	return bsearch(&v, set, n, sizeof(*set), cmp_u32) != NULL;
}

/* Fixes the ends of stretch s of period p. They are known to within a window of noise: move
 * them out as far as the pattern holds exactly (the first period, compared against the
 * prologue, counted as off). Then a prologue or epilogue that repeats with this period too (a
 * run of frees after the loop) is trimmed: events the loop never makes, judged by the last
 * period that ends with a launch (launch-free reads and frees follow a loop; a prologue can
 * launch a lot, model initialisation does), and ends that launch too little. weight 0: none. */
static struct stretch refine(const struct seq *q, size_t p, struct stretch s)
{
	const uint32_t *t = q->t;
	const uint64_t *msum = q->msum;
	while (s.lo > 0 && t[s.lo - 1] == t[s.lo - 1 + p])
		s.lo--;
	while (s.hi < q->n && t[s.hi] == t[s.hi - p])
		s.hi++;
	size_t from = s.hi;  /* the reference: the last period that ends with a launch */
	while (from > s.lo + p && launches_in(msum, from - 1, from) == 0)
		from--;
	from -= p;
	for (size_t k = 0; k < p; k++)
		q->set[k] = t[from + k];
	qsort(q->set, p, sizeof(*q->set), cmp_u32);
	while (s.lo < s.hi && !member(q->set, p, t[s.lo]))
		s.lo++;
	while (s.hi > s.lo && !member(q->set, p, t[s.hi - 1]))
		s.hi--;
	/* Copies of the loop's own launch-free events (reads of results after the loop) repeat
	 * with it too: an end whose last period carries less than half the launches of one
	 * iteration is not the loop. */
	uint64_t iteration = launches_in(msum, from, from + p);
	while (s.hi - s.lo >= p && 2 * launches_in(msum, s.lo, s.lo + p) < iteration)
		s.lo++;
	while (s.hi - s.lo >= p && 2 * launches_in(msum, s.hi - p, s.hi) < iteration)
		s.hi--;
	if (s.hi - s.lo < 3 * p)
		return (struct stretch){ 0, 0, 0, 0 };
	s.per_iteration = iteration;
	s.weight = weight_of(msum, s.lo, s.hi);
	return s;
}

/* The first period of [lo, hi) equal to the next one (within the first few): the reference
 * the stretch is aligned to. */
static size_t reference(const struct seq *q, size_t p, size_t lo, size_t hi)
{
	for (size_t x = lo; x + 2 * p <= hi && x <= lo + NOISE_EVERY * p; x++)
		if (q->badsum[x + 2 * p] == q->badsum[x + p])
			return x;
	return lo;
}

/* Whether, after an edit of a events of t at i and b of the reference r at phase j, t resumes
 * the reference: the next CONFIRM events of t (what is left before hi, at least one) continue
 * it. Where a short period brings a changed phase (a == b) round again within them, the change
 * may stay (it becomes the reference's, align) or be undone. */
static bool resumes(const uint32_t *t, size_t i, size_t a, size_t b, size_t hi, const uint32_t *r,
                    size_t p, size_t j)
{
	size_t at = i + a;
	if (at >= hi)
		return false;
	size_t c = hi - at < CONFIRM ? hi - at : CONFIRM;
	for (size_t k = 0; k < c; k++) {
		size_t phase = (j + b + k) % p, off = (phase + p - j) % p;
		if (t[at + k] != r[phase] && !(a == b && off < a && t[at + k] == t[i + off]))
			return false;
	}
	return true;
}

/* The shortest edit after which t from i resumes the reference at phase j: *a events of t
 * (inserted or changed) and *b of the reference (left out or changed), a + b smallest. None
 * found: t[i] is inserted. */
static void edit_at(const uint32_t *t, size_t i, size_t hi, const uint32_t *r, size_t p,
                    size_t j, size_t *a, size_t *b)
{
	size_t most_b = p < EDIT ? p : EDIT;
	for (size_t cost = 1; cost <= 2 * EDIT; cost++)
		for (*a = 0; *a <= cost && *a <= EDIT; (*a)++) {
			*b = cost - *a;
			if (*b <= most_b && resumes(t, i, *a, *b, hi, r, p, j))
				return;
		}
	*a = 1;
	*b = 0;
}

/* The launches of e reference events from phase j (cyclic). */
static uint64_t reference_launches(const uint32_t *launches, size_t p, size_t j, size_t e)
{
	uint64_t sum = 0;
	for (size_t k = 0; k < e; k++)
		sum += launches[(j + k) % p];
	return sum;
}

/* What an alignment of [ref, hi) to its reference period found, counted up to the last whole
 * iteration. A cluster is a run of edits between matched events that involves launches (a
 * boundary more or less, a copy or an event record a timing decides, does not count);
 * `limited` those that count against the rate of noise: all but substitutions (events
 * replaced by as many of their kind), and those too where an iteration's substitutions
 * (`swaps` of them so far, `swapped` launches) carry more than noise; `structural` those
 * carrying more than noise, the first of them at [cut_lo, cut_hi). `launches`: those of
 * matched events, and of changed ones as far as they replace the reference's (a kernel
 * another shape picks explains its place). */
struct walk {
	size_t end, last, iterations, clusters, limited, swaps, structural, cut_lo, cut_hi;
	uint64_t mass, launches, per, swapped;
};

/* An edited stretch (calls from `open_at` to `i`, `ins` launches inserted and `del` deleted
 * against the reference; `swap`: its events replaced as many of the reference's, each of its
 * kind) ends where the reference matches again: its launches count, and one whose net change
 * carries more than `noise` is structure (the first one's place kept). */
static void close_edit(struct walk *run, uint64_t ins, uint64_t del, bool swap, uint64_t noise,
                       size_t open_at, size_t i)
{
	uint64_t net = ins > del ? ins - del : del - ins;
	run->launches += ins < del ? ins : del;
	if (ins || del) {  /* boundaries alone are no limit */
		run->clusters++;
		if (swap) {  /* judged with the iteration's others, when it ends */
			run->swaps++;
			run->swapped += ins > del ? ins : del;
		} else {
			run->limited++;
		}
	}
	if (net > noise && run->structural++ == 0) {
		run->cut_lo = open_at;
		run->cut_hi = i;
	}
}

/* Makes the `a` events of t from i, changed, the reference's from phase j (a kernel that a
 * longer context picks from some token on is one change, not one per token). Returns whether
 * each is of the kind of the one it replaces: both launch (a kernel, a run, a graph) or
 * neither does (boundaries). */
static bool change(const struct seq *q, size_t i, size_t p, size_t j, size_t a)
{
	bool same = true;
	for (size_t k = 0; k < a; k++) {
		uint32_t launches = (uint32_t)launches_in(q->msum, i + k, i + k + 1);
		same = same && (launches > 0) == (q->ref_launches[(j + k) % p] > 0);
		q->ref[(j + k) % p] = q->t[i + k];
		q->ref_launches[(j + k) % p] = launches;
	}
	return same;
}

/* An iteration ends at i. Its substitutions are noise at any rate as long as together they
 * carry no more than noise: halves of a step that differ in more are no variants of one. */
static void iteration_ends(struct walk *run, size_t i, uint64_t noise)
{
	run->iterations++;
	run->last = run->end;
	run->end = i;
	if (run->swapped > noise)
		run->limited += run->swaps;
	run->swaps = 0;
	run->swapped = 0;
}

/* Aligns t[ref, hi) to the period t[ref, ref + p) from its start: each event matches the
 * reference's next one, or a short edit (an event inserted, left out or changed) resumes it.
 * The iterations are counted where the reference wraps, so inserted events lengthen one
 * iteration, not add one; an iteration that ends among edits counts once they end in a match
 * (what follows the loop does not become its last iteration). Changed events become the
 * reference: a kernel that another length of context picks from some token on is one change,
 * not one per token (a change that is undone costs two). */
static void align(const struct seq *q, size_t p, size_t ref, size_t hi, struct walk *w)
{
	const uint32_t *t = q->t;
	const uint64_t *msum = q->msum;
	uint32_t *r = q->ref, *rl = q->ref_launches;
	for (size_t k = 0; k < p; k++) {
		r[k] = t[ref + k];
		rl[k] = (uint32_t)launches_in(msum, ref + k, ref + k + 1);
	}
	struct walk run = { .end = ref, .last = ref, .per = launches_in(msum, ref, ref + p) };
	uint64_t noise = noise_launches(run.per), ins = 0, del = 0;
	size_t i = ref, j = 0, open_at = 0;
	bool open = false, wrapped = false;  /* wrapped: an iteration ended inside the open cluster */
	bool swap = false;                   /* the open cluster's edits are substitutions */
	*w = run;
	while (i < hi) {
		if (t[i] == r[j]) {
			if (open) {
				close_edit(&run, ins, del, swap, noise, open_at, i);
				open = false;
				if (wrapped)
					*w = run;
				wrapped = false;
			}
			run.mass += weight_of(msum, i, i + 1);
			run.launches += launches_in(msum, i, i + 1);
			i++;
			j++;
		} else {
			if (!open) {
				open = true;
				open_at = i;
				ins = del = 0;
				swap = true;
			}
			size_t a, b;
			edit_at(t, i, hi, r, p, j, &a, &b);
			ins += launches_in(msum, i, i + a);
			del += reference_launches(rl, p, j, b);
			if (a == b)
				swap = change(q, i, p, j, a) && swap;
			else
				swap = false;
			i += a;
			j += b;
		}
		if (j >= p) {  /* an iteration ends: what is counted so far stands, once edits end */
			j -= p;
			iteration_ends(&run, i, noise);
			if (open)
				wrapped = true;
			else
				*w = run;
		}
	}
}

static void add(struct loops *ls, const struct loop *l)
{
	if (ls->n == ls->cap) {
		size_t cap = ls->cap ? 2 * ls->cap : 64;
		struct loop *v = realloc(ls->v, cap * sizeof(*v));
		if (!v) {
			ls->failed = true;
			return;
		}
		ls->v = v;
		ls->cap = cap;
	}
	ls->v[ls->n++] = *l;
}

/* The stretch [lo, hi) of period p as a loop, if it is one: 3 iterations at least, launching
 * something, at most one disturbance limited by rate per NOISE_EVERY iterations, none of them
 * structure. One structural break is cut out (a different step once); two or more mean the
 * period is a part of a larger step. Returns whether a loop was added. */
static bool examine(const struct seq *q, size_t p, size_t lo, size_t hi, bool cut, struct loops *ls)
{
	if (hi - lo < 3 * p)
		return false;
	size_t ref = reference(q, p, lo, hi);
	struct walk w;
	align(q, p, ref, hi, &w);
	if (w.structural == 1 && cut) {
		bool before = examine(q, p, lo, w.cut_lo, false, ls);
		return examine(q, p, w.cut_hi, hi, false, ls) || before;
	}
	if (w.structural || w.iterations < 3 || w.per == 0 || w.limited * NOISE_EVERY > w.iterations)
		return false;
	for (size_t k = 0; k < p; k++)
		q->set[k] = q->t[ref + k];
	qsort(q->set, p, sizeof(*q->set), cmp_u32);
	uint64_t sig = cg_fmix64(p);
	for (size_t k = 0; k < p; k++)
		sig = cg_fmix64(sig ^ q->set[k]);
	struct loop l = { p, ref, w.end, w.last, w.iterations, w.clusters,
	                  w.mass, w.launches, w.per, sig };
	add(ls, &l);
	return true;
}

/* The loops of period p. Inserted events put a whole period off at lag p, so where they come
 * often, two within a window end a stretch (stretches); the alignment takes them in its
 * stride. So consecutive loops of one pattern are tried joined, and kept apart only where the
 * joined stretch is no loop (what came between them launches, more than once). */
static void loops_of_period(const struct seq *q, size_t p, struct loops *ls)
{
	size_t count = stretches(q, p), from = ls->n;
	for (size_t k = 0; k < count; k++) {
		struct stretch r = refine(q, p, q->segs[k]);
		if (r.weight)
			examine(q, p, r.lo, r.hi, true, ls);
	}
	struct loops joined = { 0 };
	size_t kept = from;
	for (size_t a = from, b; a < ls->n; a = b) {
		for (b = a + 1; b < ls->n && ls->v[b].sig == ls->v[a].sig; b++)
			;
		joined.n = 0;
		if (b - a > 1 && examine(q, p, ls->v[a].first, ls->v[b - 1].end, true, &joined) &&
		    !joined.failed && joined.n <= b - a) {
			for (size_t k = 0; k < joined.n; k++)
				ls->v[kept++] = joined.v[k];
		} else {
			for (size_t k = a; k < b; k++)
				ls->v[kept++] = ls->v[k];
		}
	}
	ls->n = kept;
	free(joined.v);
}

/* ---- Candidate periods: where stretches of KGRAM events recur ------------------------------ */

struct gram {
	uint64_t h;
	uint32_t at;
};

static int by_hash_then_place(const void *a, const void *b)
{
	const struct gram *x = a, *y = b;
	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* The CANDIDATES distances (<= max_period) at which most k-grams recur next, ascending, into
 * out; returns how many (0: none, or no memory). A step's events recur one step later, so its
 * period is among them however the step is built inside. */
static size_t candidates(const uint32_t *t, size_t n, size_t max_period, size_t *out)
{
	size_t m = n - KGRAM + 1;
	struct gram *g = malloc(m * sizeof(*g));
	uint32_t *count = calloc(max_period + 1, sizeof(*count));
	size_t found = 0;
	if (!g || !count)
		goto done;
	const uint64_t base = 0x9e3779b97f4a7c15ull;
	uint64_t top = 1, h = 0;  /* top: base^(KGRAM - 1) */
	for (int k = 0; k < KGRAM - 1; k++)
		top *= base;
	for (size_t i = 0; i < n; i++) {
		if (i >= KGRAM)
			h -= cg_fmix64(t[i - KGRAM] + 1ull) * top;
		h = h * base + cg_fmix64(t[i] + 1ull);
		if (i + 1 >= KGRAM)
			g[i + 1 - KGRAM] = (struct gram){ h, (uint32_t)(i + 1 - KGRAM) };
	}
	qsort(g, m, sizeof(*g), by_hash_then_place);
	for (size_t i = 1; i < m; i++)
		if (g[i].h == g[i - 1].h && g[i].at - g[i - 1].at <= max_period)
			count[g[i].at - g[i - 1].at]++;
	for (; found < CANDIDATES; found++) {  /* the most frequent, one at a time */
		size_t best = 0;
		for (size_t d = 1; d <= max_period; d++)
			if (count[d] > count[best])
				best = d;
		if (count[best] == 0)
			break;
		out[found] = best;
		count[best] = 0;
	}
	qsort(out, found, sizeof(*out), cmp_size);
done:
	free(g);
	free(count);
	return found;
}

/* ---- Patterns: the stretches of one loop together, and the choice among them ------------- */

struct pattern {
	size_t from, count;        /* its loops, ls->v[from, from + count), by place */
	size_t p, lo, hi, latest;  /* lo, hi: the first loop's start, the last one's end; latest:
	                            * the loop ending last, where the figures are taken */
	size_t cover, iterations;  /* events in its loops; their iterations */
	uint64_t mass, launches, per;  /* matched; per: an iteration's launches (the latest loop's) */
};

static int by_pattern_then_place(const void *a, const void *b)
{
	const struct loop *x = a, *y = b;
	if (x->p != y->p)
		return x->p < y->p ? -1 : 1;
	if (x->sig != y->sig)
		return x->sig < y->sig ? -1 : 1;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* Events two patterns' loops share. */
static size_t overlap(const struct loop *v, const struct pattern *a, const struct pattern *b)
{
	size_t i = a->from, j = b->from, sum = 0;
	while (i < a->from + a->count && j < b->from + b->count) {
		size_t lo = v[i].first > v[j].first ? v[i].first : v[j].first;
		size_t hi = v[i].end < v[j].end ? v[i].end : v[j].end;
		if (hi > lo)
			sum += hi - lo;
		if (v[i].end < v[j].end)
			i++;
		else
			j++;
	}
	return sum;
}

/* Whether a and b describe mostly the same events (half of the smaller one's): the same loop
 * seen with two periods, or a part of a step (a layer) and the step. */
static bool same_part(const struct loop *v, const struct pattern *a, const struct pattern *b)
{
	size_t smaller = a->cover < b->cover ? a->cover : b->cover;
	return 2 * overlap(v, a, b) >= smaller;
}

/* What a's loops explain within events [lo, hi): each loop's matched mass and launches in the
 * share of its events that lies there. */
static void within(const struct loop *v, const struct pattern *a, size_t lo, size_t hi,
                   double *mass, double *launches)
{
	*mass = *launches = 0;
	for (size_t i = a->from; i < a->from + a->count; i++) {
		size_t l = v[i].first > lo ? v[i].first : lo, h = v[i].end < hi ? v[i].end : hi;
		if (h <= l)
			continue;
		double share = (double)(h - l) / (double)(v[i].end - v[i].first);
		*mass += share * (double)v[i].mass;
		*launches += share * (double)v[i].launches;
	}
}

/* Whether q, a smaller period of top's part, stands for it: where both have loops, q explains
 * nearly top's mass (9/10), and the launches it leaves unexplained, per iteration of top, are
 * noise in q's iteration. (Compared where both reach: one ends an iteration before the other
 * where the epilogue happens to continue one of them.) */
static bool stands_for(const struct loop *v, const struct pattern *q, const struct pattern *top)
{
	size_t lo = q->lo > top->lo ? q->lo : top->lo, hi = q->hi < top->hi ? q->hi : top->hi;
	double qm, ql, tm, tl;
	within(v, q, lo, hi, &qm, &ql);
	within(v, top, lo, hi, &tm, &tl);
	double iterations = (double)top->iterations * (tm / (double)top->mass);
	return qm * 10 >= tm * 9 && tl - ql <= (double)noise_launches(q->per) * (iterations + 1);
}

struct ranked {
	uint64_t mass;
	size_t p, at;
};

static int by_mass(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->mass != y->mass)
		return x->mass > y->mass ? -1 : 1;
	return x->p < y->p ? -1 : x->p > y->p;
}

/* The loop among the patterns, by the rules of period.h; SIZE_MAX when there is none. Parts:
 * each pattern, heaviest first, takes the ones sharing its events; a part is represented by
 * its smallest period that stands for its heaviest (a multiple of the period tolerates longer
 * runs of noise, so its stretch may reach further into the events around the loop). */
static size_t pick(const struct loop *v, struct pattern *pt, size_t np)
{
	struct ranked *ranked = malloc(np * sizeof(*ranked));
	size_t *order = malloc(np * sizeof(*order)), *rep = malloc(np * sizeof(*rep));
	int *part = malloc(np * sizeof(*part));
	size_t parts = 0, chosen = SIZE_MAX;
	if (!ranked || !order || !rep || !part)
		goto done;
	for (size_t i = 0; i < np; i++)
		ranked[i] = (struct ranked){ pt[i].mass, pt[i].p, i };
	qsort(ranked, np, sizeof(*ranked), by_mass);
	for (size_t i = 0; i < np; i++) {
		order[i] = ranked[i].at;
		part[i] = -1;
	}
	for (size_t a = 0; a < np; a++) {
		const struct pattern *top = &pt[order[a]];
		if (part[order[a]] >= 0)
			continue;
		part[order[a]] = (int)parts;
		for (size_t b = a + 1; b < np; b++)
			if (part[order[b]] < 0 && same_part(v, top, &pt[order[b]]))
				part[order[b]] = (int)parts;
		size_t best = order[a];
		for (size_t b = a; b < np; b++) {
			const struct pattern *c = &pt[order[b]];
			if (part[order[b]] != (int)parts || c->p >= pt[best].p)
				continue;
			if (stands_for(v, c, top))
				best = order[b];
		}
		rep[parts++] = best;
	}
	/* Parts are made heaviest first: the first represents the heaviest. */
	const struct pattern *h = &pt[rep[0]];
	for (size_t k = 1; k < parts; k++) {  /* a later phase: the last of them */
		const struct pattern *c = &pt[rep[k]];
		if (c->lo >= h->hi && c->mass * LATEST_SHARE >= h->mass &&
		    (chosen == SIZE_MAX || c->hi > pt[chosen].hi))
			chosen = rep[k];
	}
	if (chosen != SIZE_MAX)
		goto done;
	chosen = rep[0];
	for (size_t k = 1; k < parts; k++) {  /* taking turns with it: the longest iteration */
		const struct pattern *c = &pt[rep[k]];
		if (c->lo < h->hi && c->hi > h->lo && c->mass * LATEST_SHARE >= h->mass &&
		    c->per > pt[chosen].per)
			chosen = rep[k];
	}
done:
	free(ranked);
	free(order);
	free(rep);
	free(part);
	return chosen;
}

/* Groups the loops (sorted here) into patterns; returns how many, or 0 without memory. */
static size_t patterns(struct loop *v, size_t n, struct pattern **out)
{
	qsort(v, n, sizeof(*v), by_pattern_then_place);
	struct pattern *pt = malloc(n * sizeof(*pt));
	size_t np = 0;
	if (!pt)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || v[i].p != v[i - 1].p || v[i].sig != v[i - 1].sig)
			pt[np++] = (struct pattern){ .from = i, .p = v[i].p, .lo = v[i].first };
		struct pattern *c = &pt[np - 1];
		c->count++;
		if (c->count == 1 || v[i].end > c->hi) {
			c->hi = v[i].end;
			c->latest = i;
			c->per = v[i].per;
		}
		c->cover += v[i].end - v[i].first;
		c->iterations += v[i].iterations;
		c->mass += v[i].mass;
		c->launches += v[i].launches;
	}
	*out = pt;
	return np;
}

bool cg_period_find(const uint32_t *t, const uint32_t *weight, size_t n, size_t max_period,
                    struct cg_period *out)
{
	if (n < 3 || max_period == 0)
		return false;
	if (max_period > n / 3)
		max_period = n / 3;
	struct seq q = { .t = t, .n = n };
	q.msum = malloc((n + 1) * sizeof(*q.msum));
	q.badsum = malloc((n + 1) * sizeof(*q.badsum));
	q.set = malloc(max_period * sizeof(*q.set));
	q.ref = malloc(max_period * sizeof(*q.ref));
	q.ref_launches = malloc(max_period * sizeof(*q.ref_launches));
	q.segs = malloc((n / 3 + 1) * sizeof(*q.segs));
	size_t *cand = malloc(CANDIDATES * sizeof(*cand)), ncand = 0;
	struct loops ls = { 0 };
	struct pattern *pt = NULL;
	bool found = false;
	if (!q.msum || !q.badsum || !q.set || !q.ref || !q.ref_launches || !q.segs || !cand)
		goto done;
	q.msum[0] = 0;
	for (size_t i = 0; i < n; i++)  /* +1: an event counts even without a launch */
		q.msum[i + 1] = q.msum[i] + (weight ? weight[i] : 1) + 1;

	bool every = (uint64_t)n * max_period <= EXHAUSTIVE || n < 2 * KGRAM;
	if (!every)
		ncand = candidates(t, n, max_period, cand);
	for (size_t k = 0; k < (every ? max_period : ncand); k++) {
		size_t p = every ? k + 1 : cand[k];
		loops_of_period(&q, p, &ls);
	}
	if (ls.failed || ls.n == 0)
		goto done;
	size_t np = patterns(ls.v, ls.n, &pt);
	size_t c = np ? pick(ls.v, pt, np) : SIZE_MAX;
	if (c == SIZE_MAX)
		goto done;
	const struct loop *l = &ls.v[pt[c].latest];
	*out = (struct cg_period){ .period = l->p, .first = l->first, .tokens = l->end - l->first,
	                           .iterations = l->iterations, .last = l->last,
	                           .disturbances = l->clusters, .launches = l->per };
	found = true;
done:
	free(q.msum);
	free(q.badsum);
	free(q.set);
	free(q.ref);
	free(q.ref_launches);
	free(q.segs);
	free(cand);
	free(ls.v);
	free(pt);
	return found;
}

size_t cg_period_runs(uint32_t *t, uint32_t *weight, size_t n, uint32_t *start)
{
	size_t m = 0;
	for (size_t i = 0, j; i < n; i = j) {
		uint64_t w = weight[i];
		for (j = i + 1; j < n && t[j] == t[i]; j++)
			w += weight[j];
		uint32_t key = t[i];
		if (j - i > 1)  /* (any hash: a run of 1000 and one of 999 are other events) */
			key = (uint32_t)cg_fmix64((uint64_t)(j - i) << 32 ^ key ^ 0x52554e53u);
		if (start)
			start[m] = (uint32_t)i;
		t[m] = key;
		weight[m] = w > UINT32_MAX ? UINT32_MAX : (uint32_t)w;
		m++;
	}
	return m;
}
