/* Period detection (loop.h). Each op's context (it and the ops just before it) is hashed
 * into a ring; a hypothesis "the stream repeats every `cand` ops" comes from where the current
 * wide context was last seen, or else the context, and lives while contexts keep matching `cand`
 * back. Once it has held for a period (or LOCK_RUN ops of a long one) the period is locked and a
 * context of the loop, the anchor, marks where a chunk ends unless a cut placed by content or
 * the program came shortly before: chosen by content, it stays put when extra work shifts an
 * iteration, and it is the same in every run of the same program. A loop no longer than a chunk
 * is cut into units of whole periods instead: its first unit ends where it has been seen
 * `warmup` times already, and a host copy or sync the program makes at the same place twice
 * moves the cut there, so that the chunk before it is a whole unit as well. */
#include <string.h>
#include "policy/loop.h"

#define CG_PERIOD_MAX 16384u  /* longest period found: the ring's size (384 KiB per stream) */
#define CG_PERIOD_FIRST 256u  /* the ring grows as the stream does */
#define LOCK_RUN 32           /* matching contexts that lock a period longer than this */

void cg_loop_init(struct cg_loop *p, uint32_t gap, uint32_t unit_max, uint32_t warmup)
{
	memset(p, 0, sizeof(*p));
	p->gap = p->long_gap = gap ? gap : 1;
	p->unit_max = unit_max ? unit_max : 1;
	p->warmup = warmup ? warmup : 1;
	p->due_at = UINT64_MAX;
	for (uint32_t i = 0; i < CG_LOOP_BOUNDARIES; i++)
		p->boundary_at[i] = UINT64_MAX;
}

void cg_loop_fini(struct cg_loop *p, void *(*mem)(void *, size_t))
{
	mem(p->ring, 0);
	mem(p->seen, 0);
	mem(p->seen_wide, 0);
	p->ring = NULL;
	p->seen = p->seen_wide = NULL;
}

/* Double the ring (it is full: t == mask + 1), keeping every context and where it was seen. */
static bool grow(struct cg_loop *p, void *(*mem)(void *, size_t))
{
	uint32_t cap = p->ring ? 2 * (p->mask + 1) : CG_PERIOD_FIRST;
	struct cg_loop_ctx *ring = mem(NULL, cap * sizeof(*ring));
	struct cg_loop_seen *seen = ring ? mem(NULL, cap * sizeof(*seen)) : NULL;
	struct cg_loop_seen *seen_wide = seen ? mem(NULL, cap * sizeof(*seen_wide)) : NULL;
	if (!seen_wide) {
		mem(ring, 0);
		mem(seen, 0);
		return false;
	}
	memset(seen, 0, cap * sizeof(*seen));
	memset(seen_wide, 0, cap * sizeof(*seen_wide));
	for (uint64_t i = 0; i < p->t; i++) {
		struct cg_loop_ctx c = p->ring[i & p->mask];
		ring[i & (cap - 1)] = c;
		seen[c.ctx & (cap - 1)] = (struct cg_loop_seen){ c.ctx, (uint32_t)i };
		seen_wide[c.wide & (cap - 1)] = (struct cg_loop_seen){ c.wide, (uint32_t)i };
	}
	cg_loop_fini(p, mem);
	p->ring = ring;
	p->seen = seen;
	p->seen_wide = seen_wide;
	p->mask = cap - 1;
	return true;
}

static bool boundary_after(const struct cg_loop *p, uint64_t at)
{
	for (uint32_t i = 0; i < CG_LOOP_BOUNDARIES; i++)
		if (p->boundary_at[i] == at)
			return true;
	return false;
}

/* The latest program boundary that marks a place of the loop found at op t, which has repeated
 * for `span` ops (UINT64_MAX: none): one inside it (or right before it) that came at the same
 * place of the iteration before as well. A boundary that came once says nothing of where
 * iterations start: the first iteration loading its modules, a kernel's first launch of a new
 * shape, or a sync before a loop whose first iteration has an op more (a generator seeding
 * its state), where the loop's period begins one op after it. */
static uint64_t loop_boundary(const struct cg_loop *p, uint64_t t, uint64_t span)
{
	uint32_t n = p->boundaries < CG_LOOP_BOUNDARIES ? p->boundaries : CG_LOOP_BOUNDARIES;
	for (uint32_t k = 1; k <= n; k++) {
		uint64_t b = p->boundary_at[(p->boundaries - k) % CG_LOOP_BOUNDARIES];
		if (b >= t || t - b > span + 1)
			break;  /* older ones are older still */
		if (b >= p->period && boundary_after(p, b - p->period))
			return b;
	}
	return UINT64_MAX;
}

/* The hypothesis held long enough: lock it. The anchor stays when it occurs in the new loop (a
 * loop found first by its repeated layers, then as a whole, keeps its cuts; extra work that
 * hid one occurrence does not move them); else the next chunk end becomes the anchor, so that
 * cuts that were already the same every iteration (content-defined, or at the program's
 * syncs) stay where they are, and cuts that rotated are pinned. A short loop keeps its anchor
 * only when it is the same loop found again: one found first by its repeated layers is cut
 * into whole periods of the loop once that is found. */
static void lock(struct cg_loop *p, uint64_t t)
{
	bool lost = !p->anchor || t - p->anchor_at >= 2 * (uint64_t)p->cand + CG_PERIOD_CONTEXT ||
	            (p->cand != p->period && p->cand <= p->unit_max);
	p->period = p->cand;
	p->phase = 0;
	p->due_at = UINT64_MAX;
	p->unit = 0;
	p->gap = p->long_gap;
	if (p->period <= p->unit_max) {
		uint32_t least = p->period < CG_LOOP_UNIT_MIN ? p->long_gap : 1;
		uint32_t k = (least + p->period - 1) / p->period;
		if (k > p->unit_max / p->period)
			k = p->unit_max / p->period;
		p->unit = p->gap = k * p->period;
	}
	if (!lost)
		return;
	if (!p->unit) {
		p->adopt = true;
		p->adopt_at = t;
		return;
	}
	/* The first unit ends where its ops have been seen `warmup` times: the loop has repeated
	 * for `span` ops, each more op is one more. Found later than that (a short warmup), it ends
	 * at the next whole number of periods from where the loop began, as it would have: the
	 * iteration's first op, not the op where the period locked, starts each unit. Where the
	 * program made a boundary inside the loop that came the iteration before too
	 * (loop_boundary), the unit ends at the same place of an iteration, so that the boundary,
	 * when it comes again, falls between two units. */
	uint64_t span = p->run + CG_PERIOD_CONTEXT - 1 + (uint64_t)p->period;
	uint64_t need = (uint64_t)(p->warmup - 1) * p->period + p->unit;
	uint64_t late = need > span ? 0 : (span - need) % p->period;
	uint64_t due = t + (need > span ? need - span : (p->period - late) % p->period);
	uint64_t b = loop_boundary(p, t, span);
	if (b != UINT64_MAX)
		due = b + (due - b + p->period - 1) / p->period * p->period;
	p->adopt = false;
	p->anchor = 0;  /* no cut until then */
	p->due_at = due;
}

struct cg_loop_fit cg_loop_align(const struct cg_loop *p, uint32_t n, uint64_t first,
                                 uint32_t len_max, uint32_t chunk_max)
{
	struct cg_loop_fit f = { 0, false };
	if (!p->unit)
		return f;
	CG_ASSERT(p->unit % p->period == 0 && p->unit <= p->unit_max);
	/* While a short loop's first unit is due, no anchor is set and none is cut at. */
	CG_ASSERT(p->due_at == UINT64_MAX || (!p->anchor && !p->adopt && !p->cut));
	/* The unit's cut, after ops that are no part of it (the stretch before the loop was
	 * found, extra work): they go, so that the unit is learned as the chunk it will be. */
	if (p->cut && n > p->unit) {
		f.drop = n - p->unit;
		return f;
	}
	/* Before a short loop's first unit ends, what comes before it can go, not the unit. */
	if (n >= chunk_max && p->due_at != UINT64_MAX) {
		uint64_t start = p->due_at + 1 - p->unit;
		if (start > first && start - first < n)
			f.drop = (uint32_t)(start - first);
		return f;
	}
	/* A short loop's chunk at its longest between two of its units' cuts (a unit of more than
	 * half a chunk, whose cut once fell where the chunk was shorter): its oldest ops go, not the
	 * chunk, so that the next cut finds a whole unit. Cut here, the chunks would be of the
	 * chunk's length, out of step with the loop, and learned again every iteration. */
	if (n >= len_max && p->anchor && !p->cut) {
		f.drop = n - (len_max - 1);
		return f;
	}
	/* A unit's cut where the chunk is shorter than a unit: a cut made before the loop was
	 * found (by content) fell inside its first unit. The chunk content cut there holds the
	 * unit's front (its ops and arguments, as they ran): the unit is whole again, and its graph
	 * comes now rather than a unit later. Else cut there too, the loop would replay in graphs
	 * of that part's length for good (a loop of one kernel in graphs of 18, not 32); the part
	 * runs on to the next anchor cut, a unit later, and its front is dropped there. */
	f.front = p->cut && n < p->unit;
	return f;
}

void cg_loop_no_units(struct cg_loop *p)
{
	p->unit_max = 0;
	p->unit = 0;
	p->gap = p->long_gap;
	p->due_at = UINT64_MAX;
	if (p->period) {  /* the next chunk end becomes the anchor */
		p->adopt = true;
		p->adopt_at = p->t;
	}
}

/* The first unit of a short loop ends here: this op's context is the anchor from now on. */
void cg_loop_due(struct cg_loop *p, uint64_t t, uint32_t ctx)
{
	p->due_at = UINT64_MAX;
	p->anchor = ctx;
	p->anchor_at = t;
	p->cut = true;
	p->cut_at = p->t;
	p->since = 0;
}

/* A boundary at the same place of a short loop as the one before, not at the anchor: the
 * program cuts its loop there every time it makes one (a host copy every 10 iterations), so
 * the anchor moves to it and the unit before each such boundary is a whole one (chunks learned
 * and armed already keep their cuts: this counts where the loop is still being learned). */
void cg_loop_boundary(struct cg_loop *p)
{
	uint32_t at = p->ctx;
	bool same = at && at == p->boundary_ctx;
	p->boundary_ctx = at;
	p->boundary_at[p->boundaries++ % CG_LOOP_BOUNDARIES] = p->t ? p->t - 1 : UINT64_MAX;
	if (!p->unit || !same || p->since == 0 || p->due_at != UINT64_MAX)
		return;
	p->anchor = at;
	p->anchor_at = p->t - 1;
	p->adopt = false;
}

/* Once per period (rare, off the per-op path): an anchor taken where the stream was not
 * periodic yet (the end of a prologue, extra work) does not come round again, so the next
 * chunk end replaces it; and where no chunk ended for a while (the stream replayed chunks
 * learned before the lock), the current op's context becomes the anchor. */
static void check_anchor(struct cg_loop *p, uint64_t t, uint32_t ctx)
{
	if (p->due_at != UINT64_MAX)
		return;  /* a short loop's first unit is still to come */
	if (!p->adopt && t - p->anchor_at > 2 * (uint64_t)p->period + CG_PERIOD_CONTEXT) {
		p->adopt = true;
		p->adopt_at = t;
	} else if (p->adopt && t - p->adopt_at >= p->period + 2 * (uint64_t)p->gap) {
		p->adopt = false;
		p->anchor = ctx;
		p->anchor_at = t;
		p->since = p->gap;
	}
}

void cg_loop_grow(struct cg_loop *p, void *(*mem)(void *, size_t))
{
	/* Out of memory: a stream with a ring keeps its size, one without finds nothing. */
	bool grown = grow(p, mem);
	p->grow_at = grown && p->mask + 1 < CG_PERIOD_MAX ? p->mask + 1 : UINT64_MAX;
}

/* How far back the context `ctx` was last seen in `seen` (0: not within the ring). */
static uint32_t seen_back(const struct cg_loop *p, const struct cg_loop_seen *seen, uint64_t t,
                          uint32_t ctx)
{
	const struct cg_loop_seen *s = &seen[ctx & p->mask];
	uint32_t d = (uint32_t)t - s->pos;
	return s->ctx == ctx && d && d <= p->mask ? d : 0;
}

/* A new hypothesis: where the wide context was last seen, if it was (a context of a loop of few
 * kernels can recur within an iteration, a wide one less), else where the context was. */
void cg_loop_miss(struct cg_loop *p, uint64_t t, uint32_t ctx, uint32_t wide)
{
	uint32_t d = seen_back(p, p->seen_wide, t, wide);
	p->cand = d ? d : seen_back(p, p->seen, t, ctx);
	p->run = p->cand ? 1 : 0;
}

void cg_loop_try_lock(struct cg_loop *p, uint64_t t)
{
	/* A shorter period locks once one whole period matched the one before (run + CONTEXT - 1
	 * ops): a loop of 14 ops at the end of its second iteration. */
	uint32_t need = LOCK_RUN;
	if (p->cand < LOCK_RUN)
		need = p->cand > CG_PERIOD_CONTEXT ? p->cand - CG_PERIOD_CONTEXT + 1 : 1;
	if (p->cand && p->run >= need)
		lock(p, t);
}

void cg_loop_wrap(struct cg_loop *p, uint64_t t, uint32_t ctx)
{
	p->phase = 0;
	/* read by cg_engine_stats without the stream's lock */
	__atomic_store_n(&p->iterations, p->iterations + 1, __ATOMIC_RELAXED);
	check_anchor(p, t, ctx);
}
