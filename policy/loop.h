/* Period detection on a stream's op hashes, for where chunks are cut: once the stream is found
 * to repeat with some period, it is also cut after one chosen op context (the anchor) when no
 * cut that content or the program placed came shortly before, so that every iteration is cut
 * the same way however short the loop and however rarely content-defined cuts hit it. A loop
 * no longer than a chunk is cut into units of whole periods, at the anchor only. It also says
 * how often the latest ops have already occurred (a chunk of a loop seen repeating for two
 * periods has been seen twice). Internal to policy/. */
#ifndef CG_POLICY_LOOP_H
#define CG_POLICY_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/assert.h"
#include "policy/mix.h"

/* Ops in a context: short enough that extra work disturbs few of them and that a loop of a
 * dozen ops is found in its second iteration (a context must fit in one period to match the one
 * a period before by then). A loop of few distinct kernels repeats such a context several times
 * an iteration, so a period is proposed by where the wide context, of CG_PERIOD_WIDE ops, was
 * last seen, where it was: most of those occur once per iteration (a loop of 3,000 ops of two
 * kernels was not found by 8-op contexts alone). */
#define CG_PERIOD_CONTEXT 8
#define CG_PERIOD_WIDE 16

#define CG_LOOP_BOUNDARIES 8  /* latest program boundaries remembered */

struct cg_loop {
	/* Over the last `mask + 1` ops: the hash of each op with the CG_PERIOD_CONTEXT - 1 ops
	 * before it (its context) and with the CG_PERIOD_WIDE - 1 before it (its wide context),
	 * and where each context and each wide one was last seen (direct-mapped: a collision
	 * forgets). */
	struct cg_loop_ctx { uint32_t ctx, wide; } *ring;
	struct cg_loop_seen { uint32_t ctx, pos; } *seen, *seen_wide;
	uint32_t mask;
	uint64_t t;               /* ops pushed */
	uint64_t window, wide;    /* polynomial hashes of the latest CG_PERIOD_CONTEXT and
	                             CG_PERIOD_WIDE op hashes */
	uint64_t last[CG_PERIOD_WIDE];  /* those op hashes, by t % CG_PERIOD_WIDE */
	uint32_t cand, run;       /* hypothesis: ctx[t] == ctx[t - cand] for the last `run` ops */
	uint32_t period;          /* the period locked on, 0: none yet */
	uint32_t ctx;             /* the latest op's context */
	uint32_t anchor;          /* the context a chunk ends after (0: none yet) */
	uint64_t anchor_at;       /* where it was last seen */
	uint64_t since;           /* ops since the latest pinned cut (cg_loop_chunk_end) */
	uint32_t gap;             /* the anchor cuts after this many ops without a pinned cut */
	uint32_t long_gap;        /* gap in a loop longer than a unit (cg_loop_init) */
	uint32_t unit_max;        /* longest unit: a chunk */
	uint32_t warmup;          /* sightings that earn a chunk its graph */
	uint32_t unit;            /* ops in a chunk of the locked loop (whole periods), 0: the loop
	                             is longer than a chunk or none is locked */
	uint64_t due_at;          /* op at which the first unit of a short loop ends (UINT64_MAX:
	                             none): the earliest one seen `warmup` times */
	uint32_t boundary_ctx;    /* context of the op before the latest program boundary */
	uint64_t boundary_at[CG_LOOP_BOUNDARIES];  /* where the op before each of the latest
	                             boundaries was, by count % CG_LOOP_BOUNDARIES (UINT64_MAX:
	                             none) */
	uint32_t boundaries;      /* program boundaries seen */
	uint32_t phase;           /* ops into the current iteration */
	uint64_t iterations;      /* periods completed since the first lock */
	uint64_t cut_at;          /* ops pushed when the latest cut at the anchor was due */
	bool cut;                 /* the op just pushed should end a chunk */
	bool adopt;               /* the next chunk end becomes the anchor */
	uint64_t adopt_at;        /* where adopt was set */
	uint64_t grow_at;         /* t at which the ring grows (UINT64_MAX: never again) */
};

/* A loop of this many ops or more is cut into units of one period (a graph of 8 launches saves
 * about 25 us of host time per launch, 8 x 3.4 - 2.5, far more than deferring and patching
 * cost); a shorter one, a loop of one kernel, into units of whole periods at least `gap` ops
 * long: there each graph launch's own cost on the GPU shows (on the H200, 1000 tiny kernels
 * replay at 3.77x in one graph, 3.47x in graphs of 16). */
#define CG_LOOP_UNIT_MIN 8

/* `gap`: fewest ops from a pinned cut to an anchor cut in a loop longer than `unit_max` (so
 * that a loop of many ops is not cut into pieces shorter than content would cut it), and the
 * shortest unit of a loop of fewer than CG_LOOP_UNIT_MIN ops; `warmup`: sightings before a
 * chunk gets its graph. Allocates lazily; nothing here can fail visibly. */
void cg_loop_init(struct cg_loop *p, uint32_t gap, uint32_t unit_max, uint32_t warmup);
void cg_loop_fini(struct cg_loop *p, void *(*mem)(void *, size_t));
/* A unit the host waits for whole at its runs (its chunk was found exposed): the loop is cut
 * from now on as one longer than a chunk, by content and at the anchor, into chunks whose
 * graphs launch while the host still submits the rest of the iteration. */
void cg_loop_no_units(struct cg_loop *p);
/* The rare parts of cg_loop_push (loop.c). */
void cg_loop_grow(struct cg_loop *p, void *(*mem)(void *, size_t));
void cg_loop_miss(struct cg_loop *p, uint64_t t, uint32_t ctx, uint32_t wide);
void cg_loop_try_lock(struct cg_loop *p, uint64_t t);
void cg_loop_wrap(struct cg_loop *p, uint64_t t, uint32_t ctx);
void cg_loop_due(struct cg_loop *p, uint64_t t, uint32_t ctx);

/* A window hash is sum(h[t - i] * MUL^i) mod 2^64; MUL^8 (MUL^16) takes out the op leaving it. */
#define CG_PERIOD_MUL 0x9e3779b97f4a7c15ull
#define CG_PERIOD_MUL2 (CG_PERIOD_MUL * CG_PERIOD_MUL)
#define CG_PERIOD_MUL4 (CG_PERIOD_MUL2 * CG_PERIOD_MUL2)
#define CG_PERIOD_MUL8 (CG_PERIOD_MUL4 * CG_PERIOD_MUL4)
#define CG_PERIOD_MUL16 (CG_PERIOD_MUL8 * CG_PERIOD_MUL8)
_Static_assert(CG_PERIOD_CONTEXT == 8 && CG_PERIOD_WIDE == 16,
               "CG_PERIOD_MUL8 and CG_PERIOD_MUL16 are the multipliers to those powers");

/* One more op; sets p->cut. Inline (it runs on every launch), O(1) amortised. */
static inline void cg_loop_push(struct cg_loop *p, uint64_t hash, void *(*mem)(void *, size_t))
{
	p->cut = false;
	if (__builtin_expect(p->t == p->grow_at, 0))
		cg_loop_grow(p, mem);
	if (!p->ring)
		return;
	uint64_t t = p->t++;
	uint64_t *out = &p->last[t % CG_PERIOD_WIDE];
	uint64_t mid = p->last[(t + CG_PERIOD_WIDE - CG_PERIOD_CONTEXT) % CG_PERIOD_WIDE];
	p->window = p->window * CG_PERIOD_MUL + hash - mid * CG_PERIOD_MUL8;
	p->wide = p->wide * CG_PERIOD_MUL + hash - *out * CG_PERIOD_MUL16;
	*out = hash;
	uint32_t ctx = (uint32_t)(cg_fmix64(p->window) >> 32) | 1;  /* 0: empty */
	uint32_t wide = (uint32_t)(cg_fmix64(p->wide) >> 32) | 1;
	p->ctx = ctx;
	p->ring[t & p->mask] = (struct cg_loop_ctx){ ctx, wide };
	if (p->cand && ctx == p->ring[(t - p->cand) & p->mask].ctx)
		p->run++;
	else
		cg_loop_miss(p, t, ctx, wide);
	p->seen[ctx & p->mask] = (struct cg_loop_seen){ ctx, (uint32_t)t };
	p->seen_wide[wide & p->mask] = (struct cg_loop_seen){ wide, (uint32_t)t };
	if (p->cand != p->period)
		cg_loop_try_lock(p, t);
	p->since++;
	if (ctx == p->anchor && !p->adopt) {
		p->anchor_at = t;
		if (p->since >= p->gap) {
			p->cut = true;
			p->cut_at = p->t;
			p->since = 0;
		}
	}
	if (__builtin_expect(t == p->due_at, 0))
		cg_loop_due(p, t, ctx);
	if (p->period && ++p->phase >= p->period)
		cg_loop_wrap(p, t, ctx);
}

/* The engine ends a chunk after the latest op: `pinned` where content or the program put the
 * cut (a cut-worthy op, a boundary, the anchor), not where the chunk reached its longest. */
static inline void cg_loop_chunk_end(struct cg_loop *p, bool pinned)
{
	if (pinned)
		p->since = 0;
	if (p->adopt) {
		p->adopt = false;
		p->anchor = p->ctx;
		p->anchor_at = p->t - 1;
		p->since = 0;
	}
}

/* How the learning chunk stands against a short loop's units, before its cut is looked for
 * (cg_loop_align): `drop` of its oldest ops are no part of the unit; or (`front`) it is
 * shorter than the unit whose cut is due here, and the unit's front is to be put back. */
struct cg_loop_fit {
	uint32_t drop;
	bool front;
};

/* The learning chunk of `n` ops, the first of them op `first`, its longest `len_max` (and
 * `chunk_max` the engine's): what brings it in step with the loop's units (none where the loop
 * is not cut into units). */
struct cg_loop_fit cg_loop_align(const struct cg_loop *p, uint32_t n, uint64_t first,
                                 uint32_t len_max, uint32_t chunk_max);

/* The program made a boundary after the latest op (before the engine ends the chunk there). */
void cg_loop_boundary(struct cg_loop *p);

/* How many times the latest `n` ops have occurred, as far as the loop has been seen repeating
 * (1: only now). Hash equality: a collision only builds a graph that is not used. */
static inline uint32_t cg_loop_sightings(const struct cg_loop *p, uint32_t n)
{
	if (!p->period || p->cand != p->period || !p->run)
		return 1;
	/* ops equal to the ops one period before: the matching contexts and the ops in the first */
	uint64_t same = p->run + CG_PERIOD_CONTEXT - 1, span = same + p->period;
	if (span < n)
		return 1;
	uint64_t k = (span - n) / p->period + 1;
	return k < 1u << 20 ? (uint32_t)k : 1u << 20;
}

/* Was a cut due after the op before the latest one? */
static inline bool cg_loop_cut_before(const struct cg_loop *p)
{
	return p->cut_at && p->cut_at == p->t - 1;
}

#endif
