/* The calls the wrappers count on every call (entry points, boundaries by kind, ops bypassed by
 * kind), for the report. Counted per thread: a call adds one to a counter in its thread's own
 * block, a plain load and store on memory no other thread writes, where one shared array would
 * cost a locked add on a cache line every submitting thread contends for. A block belongs to one
 * thread at a time; at thread exit it is released with its counts and the next new thread
 * continues it, so the blocks are as many as threads ever ran at once, and a sum over all blocks
 * is every call counted. */
#ifndef CG_SHIM_COUNTS_H
#define CG_SHIM_COUNTS_H

#include <stdatomic.h>
#include <stdint.h>

#include "driver.h"
#include "policy/reason.h"
#include "shim/base/shim.h"

enum {
	CG_COUNT_ENTRY = 0,                           /* + CG_E_*: calls of the entry point */
	CG_COUNT_BOUNDARY = CG_E_COUNT,               /* + reason: boundaries of that kind */
	CG_COUNT_BYPASS = CG_E_COUNT + CG_R_COUNT,    /* + reason: ops that bypassed the engine */
	/* + CG_E_*: boundary calls forwarded while the process was settled (boundary.c), each
	 * one call of its entry point and one boundary of its kind, counted once here */
	CG_COUNT_FORWARD = CG_E_COUNT + 2 * CG_R_COUNT,
	CG_COUNT_N = 2 * CG_E_COUNT + 2 * CG_R_COUNT,
};

struct cg_counts {
	_Atomic uint64_t n[CG_COUNT_N];
	_Atomic int owned;          /* a live thread counts here */
	struct cg_counts *next;     /* every block, never freed */
};

/* A thread without a block yet, or past its exit: takes a block, or counts in a shared one. */
void cg_count_slow(unsigned i);

/* Counts in this thread's block c (cg_tls.counts, not NULL). */
static inline void cg_count_in(struct cg_counts *c, unsigned i)
{
	/* The only writer: no locked instruction. Relaxed atomics so that the reader's sum is
	 * well defined. */
	atomic_store_explicit(&c->n[i], atomic_load_explicit(&c->n[i], memory_order_relaxed) + 1,
	                      memory_order_relaxed);
}

static inline void cg_count(unsigned i)
{
	struct cg_counts *c = cg_tls.counts;
	if (__builtin_expect(c == NULL, 0)) {
		cg_count_slow(i);
		return;
	}
	cg_count_in(c, i);
}

/* The short path of a boundary the shim only forwards (boundary.c, hooks.c): this thread's block
 * while the process is settled (cg_unsettled, shim.h) and the call is the program's, not the
 * shim's own nor NCCL's inside a collective (cg_tls.internal: forwarded uncounted, as by the
 * full path); NULL otherwise, and on a thread without a block yet (the full path gives it one). */
static inline struct cg_counts *cg_count_forwarded(void)
{
	if (__builtin_expect(atomic_load_explicit(&cg_unsettled, memory_order_acquire) == 0, 1) &&
	    cg_tls.internal == 0)
		return cg_tls.counts;
	return NULL;
}

/* Counter i summed over every thread (a moment's reading: exact once the threads are quiet). */
uint64_t cg_count_total(unsigned i);
/* What the report says: calls of entry point e, and boundaries of kind r, forwarded ones
 * included. */
uint64_t cg_count_entry(enum cg_entry e);
uint64_t cg_count_boundaries(enum cg_reason r);

#endif
