/* Per-thread call counters (counts.h); a thread's block hangs off its cg_tls (shim.h). */
#include <pthread.h>
#include <stdlib.h>

#include "counts.h"

static struct cg_counts shared;             /* threads without a block of their own */
static _Atomic(struct cg_counts *) blocks;  /* every block, newest first */
static pthread_key_t release_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static _Bool have_key;

/* Thread exit: the block goes back with its counts. A call made later in the thread's exit
 * (another library's destructor) counts in the shared block. */
static void release(void *block)
{
	struct cg_counts *c = block;
	cg_tls.counts = NULL;
	cg_tls.counts_shared = true;
	atomic_store_explicit(&c->owned, 0, memory_order_release);
}

static void make_key(void)
{
	have_key = pthread_key_create(&release_key, release) == 0;
}

/* A released block, or a new one; NULL when neither can be had. Lock-free, so that a child
 * forked while another thread held anything here still finds blocks (its parent's threads'
 * blocks stay owned in the child, their counts included in its sums). */
static struct cg_counts *take(void)
{
	for (struct cg_counts *c = atomic_load_explicit(&blocks, memory_order_acquire); c; c = c->next) {
		int free_ = 0;
		if (atomic_load_explicit(&c->owned, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_strong_explicit(&c->owned, &free_, 1, memory_order_acquire,
		                                            memory_order_relaxed))
			return c;
	}
	struct cg_counts *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	atomic_init(&c->owned, 1);
	struct cg_counts *head = atomic_load_explicit(&blocks, memory_order_relaxed);
	do
		c->next = head;
	while (!atomic_compare_exchange_weak_explicit(&blocks, &head, c, memory_order_release,
	                                              memory_order_relaxed));
	return c;
}

void cg_count_slow(unsigned i)
{
	if (!cg_tls.counts_shared) {
		pthread_once(&key_once, make_key);
		struct cg_counts *c = have_key ? take() : NULL;
		if (c && pthread_setspecific(release_key, c) == 0) {
			cg_tls.counts = c;
			cg_count(i);
			return;
		}
		if (c)
			atomic_store_explicit(&c->owned, 0, memory_order_release);
		cg_tls.counts_shared = true; /* do not try again on every call */
	}
	atomic_fetch_add_explicit(&shared.n[i], 1, memory_order_relaxed);
}

uint64_t cg_count_total(unsigned i)
{
	uint64_t sum = atomic_load_explicit(&shared.n[i], memory_order_relaxed);
	for (struct cg_counts *c = atomic_load_explicit(&blocks, memory_order_acquire); c; c = c->next)
		sum += atomic_load_explicit(&c->n[i], memory_order_relaxed);
	return sum;
}

/* The kind of boundary each boundary entry point makes (cuda.def). */
static const unsigned char boundary_kind[CG_E_COUNT] = {
#define CG_PURE(n)
#define CG_HOOK(n, ...)
#define CG_BOUNDARY(n, proto, params, args, scope, stream, reason) [CG_E_##n] = CG_R_##reason,
#include "cuda.def"
#undef CG_BOUNDARY
#undef CG_HOOK
#undef CG_PURE
};
_Static_assert(CG_R_COUNT <= 256, "boundary_kind holds a reason in a byte");

uint64_t cg_count_entry(enum cg_entry e)
{
	return cg_count_total(CG_COUNT_ENTRY + e) + cg_count_total(CG_COUNT_FORWARD + e);
}

uint64_t cg_count_boundaries(enum cg_reason r)
{
	uint64_t n = cg_count_total(CG_COUNT_BOUNDARY + r);
	for (unsigned e = 0; e < CG_E_COUNT; e++)
		if (boundary_kind[e] == r && r != CG_R_NONE)
			n += cg_count_total(CG_COUNT_FORWARD + e);
	return n;
}
