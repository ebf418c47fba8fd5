/* Period detection (loop.h). Each op's context (it and the ops just before it) is hashed
 * into a ring; a hypothesis "the stream repeats every `cand` ops" comes from where the current
 * context was last seen and lives while contexts keep matching `cand` back. Once it has held
 * for a period (or LOCK_RUN ops of a long one) the period is locked and a context of the loop,
 * the anchor, marks where a chunk ends unless a cut placed by content or the program came
 * shortly before: chosen by content, it stays put when extra work shifts an iteration, and it
 * is the same in every run of the same program. */
#include <string.h>
#include "policy/loop.h"

#define CG_PERIOD_MAX 16384u  /* longest period found: the ring's size (192 KiB per stream) */
#define CG_PERIOD_FIRST 256u  /* the ring grows as the stream does */
#define LOCK_RUN 32           /* matching contexts that lock a period longer than this */
#define MIN_RUN 8             /* fewest matching contexts that lock any period */

void cg_loop_init(struct cg_loop *p, uint32_t gap)
{
	memset(p, 0, sizeof(*p));
	p->gap = gap ? gap : 1;
}

void cg_loop_fini(struct cg_loop *p, void *(*mem)(void *, size_t))
{
	mem(p->ring, 0);
	mem(p->seen, 0);
	p->ring = NULL;
	p->seen = NULL;
}

/* Double the ring (it is full: t == mask + 1), keeping every context and where it was seen. */
static bool grow(struct cg_loop *p, void *(*mem)(void *, size_t))
{
	uint32_t cap = p->ring ? 2 * (p->mask + 1) : CG_PERIOD_FIRST;
	uint32_t *ring = mem(NULL, cap * sizeof(*ring));
	struct cg_loop_seen *seen = ring ? mem(NULL, cap * sizeof(*seen)) : NULL;
	if (!seen) {
		mem(ring, 0);
		return false;
	}
	memset(seen, 0, cap * sizeof(*seen));
	for (uint64_t i = 0; i < p->t; i++) {
		uint32_t ctx = p->ring[i & p->mask];
		ring[i & (cap - 1)] = ctx;
		seen[ctx & (cap - 1)] = (struct cg_loop_seen){ ctx, (uint32_t)i };
	}
	cg_loop_fini(p, mem);
	p->ring = ring;
	p->seen = seen;
	p->mask = cap - 1;
	return true;
}

/* The hypothesis held long enough: lock it. The anchor stays when it occurs in the new loop (a
 * loop found first by its repeated layers, then as a whole, keeps its cuts; extra work that
 * hid one occurrence does not move them); else the next chunk end becomes the anchor, so that
 * cuts that were already the same every iteration (content-defined, or at the program's
 * syncs) stay where they are, and cuts that rotated are pinned. */
static void lock(struct cg_loop *p, uint64_t t)
{
	if (!p->anchor || t - p->anchor_at >= 2 * (uint64_t)p->cand + CG_PERIOD_CONTEXT) {
		p->adopt = true;
		p->adopt_at = t;
	}
	p->period = p->cand;
	p->phase = 0;
}

/* Once per period (rare, off the per-op path): an anchor taken where the stream was not
 * periodic yet (the end of a prologue, extra work) does not come round again, so the next
 * chunk end replaces it; and where no chunk ended for a while (the stream replayed chunks
 * learned before the lock), the current op's context becomes the anchor. */
static void check_anchor(struct cg_loop *p, uint64_t t, uint32_t ctx)
{
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

void cg_loop_miss(struct cg_loop *p, uint64_t t, uint32_t ctx)
{
	const struct cg_loop_seen *seen = &p->seen[ctx & p->mask];
	uint32_t d = (uint32_t)t - seen->pos;
	p->cand = seen->ctx == ctx && d && d <= p->mask ? d : 0;
	p->run = p->cand ? 1 : 0;
}

void cg_loop_try_lock(struct cg_loop *p, uint64_t t)
{
	if (p->cand && p->run >= MIN_RUN && p->run >= (p->cand < LOCK_RUN ? p->cand : LOCK_RUN))
		lock(p, t);
}

void cg_loop_wrap(struct cg_loop *p, uint64_t t, uint32_t ctx)
{
	p->phase = 0;
	/* read by cg_engine_stats without the stream's lock */
	__atomic_store_n(&p->iterations, p->iterations + 1, __ATOMIC_RELAXED);
	check_anchor(p, t, ctx);
}
