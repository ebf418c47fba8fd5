/* Per-thread call counters (counts.h). */
#include <pthread.h>
#include <stdlib.h>

#include "counts.h"

_Thread_local struct cg_counts *cg_tl_counts;
static _Thread_local _Bool shared_only; /* released its block at exit, or found none */

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
	cg_tl_counts = NULL;
	shared_only = 1;
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
	if (!shared_only) {
		pthread_once(&key_once, make_key);
		struct cg_counts *c = have_key ? take() : NULL;
		if (c && pthread_setspecific(release_key, c) == 0) {
			cg_tl_counts = c;
			cg_count(i);
			return;
		}
		if (c)
			atomic_store_explicit(&c->owned, 0, memory_order_release);
		shared_only = 1; /* do not try again on every call */
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
