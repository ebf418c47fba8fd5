/* Per-thread call counters (shim/loader/counts.h): sums are exact across threads that come and go, a
 * block released at thread exit is taken by the next thread (blocks: as many as threads ran at
 * once), and a call made after a thread released its block still counts. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "shim/loader/counts.h"

#define WAVES 8
#define THREADS 6
#define CALLS 20000

static void *counter(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	for (int k = 0; k < CALLS; k++) {
		cg_count(CG_COUNT_ENTRY + i % CG_E_COUNT);
		cg_count(CG_COUNT_BOUNDARY + CG_R_SYNC);
	}
	return NULL;
}

static unsigned blocks_now(void)
{
	/* every block ever made is in the list reached through a thread's own block */
	unsigned n = 0;
	for (struct cg_counts *c = ((struct cg_counts *)cg_tls.counts); c; c = c->next)
		n++;
	return n;
}

static void test_threads_come_and_go(void **state)
{
	(void)state;
	uint64_t before = cg_count_total(CG_COUNT_BOUNDARY + CG_R_SYNC);
	for (int w = 0; w < WAVES; w++) {
		pthread_t t[THREADS];
		for (unsigned i = 0; i < THREADS; i++)
			assert_int_equal(pthread_create(&t[i], NULL, counter, (void *)(uintptr_t)i), 0);
		for (unsigned i = 0; i < THREADS; i++)
			assert_int_equal(pthread_join(t[i], NULL), 0);
	}
	assert_int_equal(cg_count_total(CG_COUNT_BOUNDARY + CG_R_SYNC) - before,
	                 (uint64_t)WAVES * THREADS * CALLS);
	for (unsigned i = 0; i < THREADS; i++)
		assert_int_equal(cg_count_total(CG_COUNT_ENTRY + i), (uint64_t)WAVES * CALLS);
	/* This thread takes a block now: the newest in the list, so every block is behind it.
	 * Released blocks were reused: at most one per thread that ran at once, plus this one. */
	cg_count(CG_COUNT_BYPASS + CG_R_SCOPE);
	assert_non_null(((struct cg_counts *)cg_tls.counts));
	assert_true(blocks_now() <= THREADS + 1);
	assert_int_equal(cg_count_total(CG_COUNT_BYPASS + CG_R_SCOPE), 1);
}

/* A thread-specific destructor that runs after ours: the thread's block is gone by then. */
static pthread_key_t late_key;
static void late(void *v)
{
	(void)v;
	cg_count(CG_COUNT_BOUNDARY + CG_R_HOST_COPY);
}

static void *late_counter(void *arg)
{
	(void)arg;
	cg_count(CG_COUNT_BOUNDARY + CG_R_HOST_COPY);  /* takes the block; its key is older */
	pthread_setspecific(late_key, (void *)1);
	return NULL;
}

static void test_calls_during_thread_exit_count(void **state)
{
	(void)state;
	assert_int_equal(pthread_key_create(&late_key, late), 0);
	uint64_t before = cg_count_total(CG_COUNT_BOUNDARY + CG_R_HOST_COPY);
	for (int i = 0; i < 4; i++) {
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, late_counter, NULL), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
	}
	assert_int_equal(cg_count_total(CG_COUNT_BOUNDARY + CG_R_HOST_COPY) - before, 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_come_and_go),
		cmocka_unit_test(test_calls_during_thread_exit_count),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
