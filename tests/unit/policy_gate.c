/* The cost gate's arithmetic (policy/gate.h) on chunk figures of the kind the H200 gave: a
 * one-op chunk whose graph is slower on the GPU than its kernel alone, a difference within the
 * samples' noise, too few eager samples for the warmup, a chunk waited for at every run and at
 * one run in ten, and the samples a graph far under its saving no longer needs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "policy/gate.h"

static const struct cg_gate_costs h200 = { .launch_host_us = 3.4, .graph_launch_host_us = 2.5,
                                           .warmup = 2 };

/* A chunk of n ops whose graph took `graph` us in each of 3 samples and whose ops took `eager`
 * us in each of `eager_n` bursts, launched 20 times. */
static struct cg_chunk timed(uint32_t n, double graph, double eager, uint32_t eager_n)
{
	struct cg_chunk t;
	memset(&t, 0, sizeof(t));
	t.n = n;
	t.graph_us = graph;
	t.graph_n = 3;
	t.eager_us = eager;
	t.eager_n = eager_n;
	t.timed_eager = (uint8_t)eager_n;
	t.launched = 20;
	return t;
}

/* ... with one eager sample, submitted over `span` us and waited for right after every run. */
static struct cg_chunk waited_for(uint32_t n, double graph, double eager, double span)
{
	struct cg_chunk t = timed(n, graph, eager, 1);
	t.span_us = span;
	t.span_n = 1;
	t.waits = t.launched + t.timed_eager;
	return t;
}

static void test_slower_graph_is_gated(void **state)
{
	/* one op: 0.9 us saved; the graph 8.1 us against the kernel's 5.0 (conf-devices) */
	struct cg_chunk t = timed(1, 8.1, 5.0, 1);
	struct cg_gate_verdict v;
	assert_true(cg_gate_plausible(&h200, &t));
	cg_gate_judge(&h200, &t, &v);
	assert_int_equal(v.reason, CG_R_COST_GATE);
	assert_true(v.saved_us > 0.89 && v.saved_us < 0.91);
	assert_true(v.graph_us > 8.09 && v.graph_us < 8.11 && v.eager_us > 4.99 && v.eager_us < 5.01);
	/* 0.6 us slower is within the noise (1 us): the graph stays */
	t = timed(1, 8.1, 7.5, 1);
	cg_gate_judge(&h200, &t, &v);
	assert_int_equal(v.reason, CG_R_NONE);
}

static void test_eager_samples_follow_the_warmup(void **state)
{
	struct cg_gate_costs w3 = h200, w1 = h200;
	w3.warmup = 3;
	w1.warmup = 1;
	assert_int_equal(cg_gate_eager_samples(&h200), 1);
	assert_int_equal(cg_gate_eager_samples(&w3), 2);
	assert_int_equal(cg_gate_eager_samples(&w1), 1);
	struct cg_chunk t = timed(1, 8.1, 5.0, 1);
	struct cg_gate_verdict v;
	cg_gate_judge(&w3, &t, &v);
	assert_int_equal(v.reason, CG_R_NONE);  /* one sample of the two warmup 3 takes */
	t = timed(1, 8.1, 5.0, 2);
	cg_gate_judge(&w3, &t, &v);
	assert_int_equal(v.reason, CG_R_COST_GATE);
}

/* conf_uploads' 3-op chunk before its sync, as the H200 timed it: graph 16.5 us, its ops 21.5 us
 * in a burst, submitted over 8.3 us. Waited for at every run, its wait would end 2.43 us later
 * deferred: exposed. Waited for at one run in ten, the launch time saved at the other nine
 * (7.7 us each) outweighs it. */
static void test_exposure_by_the_share_waited_for(void **state)
{
	struct cg_chunk t = waited_for(3, 16.5, 21.5, 8.333);
	struct cg_gate_verdict v;
	cg_gate_judge(&h200, &t, &v);
	assert_int_equal(v.reason, CG_R_EXPOSED);
	assert_true(v.exposure_us > 2.42 && v.exposure_us < 2.44);
	assert_true(v.waited_share > 0.999);
	assert_true(cg_gate_span_us(&t) > 8.33 && cg_gate_span_us(&t) < 8.34);
	t.waits = 2;  /* of 21 runs */
	cg_gate_judge(&h200, &t, &v);
	assert_int_equal(v.reason, CG_R_NONE);
	assert_true(v.waited_share > 0.09 && v.waited_share < 0.1);
	t.waits = 0;
	cg_gate_judge(&h200, &t, &v);
	assert_int_equal(v.reason, CG_R_NONE);
	assert_true(v.exposure_us == 0 && v.waited_share == 0);
}

/* A chunk timed afresh (its work grew: a longer sequence) is judged with its eager samples
 * shifted by what its graph's time grew. A 6-op chunk waited for at every run, submitted over
 * 10 us (a host ahead of the GPU): graph 30 us, its ops 45 us in a burst, not exposed (the
 * burst's gaps outweigh holding the ops back). Timed afresh at the same 30 us, nothing changes;
 * at 330 us the eager ops stand for 345 us, and the verdict is the same again, where judging
 * the graph's new time against the old eager samples would call it slower by far more than its
 * saving (cost gate). */
static void test_eager_samples_shifted_as_the_work_grows(void **state)
{
	struct cg_chunk t = waited_for(6, 30.0, 45.0, 10.0);
	struct cg_gate_verdict v;
	cg_gate_judge(&h200, &t, &v);
	assert_int_equal(v.reason, CG_R_NONE);
	double before = v.exposure_us;
	t.retimes = 1;
	t.graph_before_us = 30.0;
	cg_gate_judge(&h200, &t, &v);
	assert_int_equal(v.reason, CG_R_NONE);
	assert_true(v.eager_us > 44.99 && v.eager_us < 45.01 && v.exposure_us == before);
	t.graph_us = 330.0;
	cg_gate_judge(&h200, &t, &v);
	assert_int_equal(v.reason, CG_R_NONE);
	assert_true(v.eager_us > 344.99 && v.eager_us < 345.01);
	assert_true(v.exposure_us > before - 0.01 && v.exposure_us < before + 0.01);
	t.retimes = 0;
	cg_gate_judge(&h200, &t, &v);
	assert_int_equal(v.reason, CG_R_COST_GATE);
}

/* A graph far under the launch time it saves needs no eager sample, and no further sample of
 * any kind; one over it needs an eager one until a sample shows it no more than half that
 * saving slower, unless it has too few nodes to fall that far behind its eager ops. */
static void test_samples_a_chunk_still_needs(void **state)
{
	struct cg_chunk t = timed(16, 20.0, 0, 0);  /* saves 51.9 us */
	struct cg_gate_verdict v;
	assert_false(cg_gate_plausible(&h200, &t));
	cg_gate_judge(&h200, &t, &v);
	assert_true(v.settled);
	assert_int_equal(v.reason, CG_R_NONE);
	/* under its saving and the noise, no eager time could get it gated; just over, one could */
	t = timed(16, 53.0, 0, 0);
	assert_false(cg_gate_plausible(&h200, &t));
	t.eager_n = 3;
	cg_gate_judge(&h200, &t, &v);
	assert_int_equal(v.reason, CG_R_NONE);  /* (eager ops taking no time at all) */
	t = timed(16, 54.0, 0, 0);
	assert_true(cg_gate_plausible(&h200, &t));
	t.graph_n = 1;  /* the least of two samples at least: the next may come out under */
	assert_false(cg_gate_plausible(&h200, &t));
	t.graph_n = 2;
	assert_true(cg_gate_plausible(&h200, &t));
	t = timed(16, 80.0, 0, 0);
	assert_true(cg_gate_plausible(&h200, &t));
	cg_gate_judge(&h200, &t, &v);
	assert_false(v.settled);
	t = timed(16, 80.0, 70.0, 1);  /* 10 us slower: less than half of 51.9 */
	assert_false(cg_gate_plausible(&h200, &t));
	/* 12 ops around a 6 ms kernel (conf-rt-ptds's step): 38.3 us saved and 187.5 of noise,
	 * more than 12 nodes can fall behind by; the same ops around GEMMs of 150 us, less */
	t = timed(12, 6250.0, 0, 0);
	assert_false(cg_gate_plausible(&h200, &t));
	t = timed(12, 150.0, 0, 0);
	assert_true(cg_gate_plausible(&h200, &t));
	t = timed(1, 300.0, 0, 0);  /* one node: 0.9 us saved, 9 of noise */
	assert_true(cg_gate_plausible(&h200, &t));
	t = timed(1, 600.0, 0, 0);  /* 18 of noise */
	assert_false(cg_gate_plausible(&h200, &t));
	assert_true(cg_gate_launch_saved_us(&h200, 16, 1) > 51.89);
	assert_true(cg_gate_launch_saved_us(&h200, 0, 1) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slower_graph_is_gated),
		cmocka_unit_test(test_eager_samples_follow_the_warmup),
		cmocka_unit_test(test_exposure_by_the_share_waited_for),
		cmocka_unit_test(test_eager_samples_shifted_as_the_work_grows),
		cmocka_unit_test(test_samples_a_chunk_still_needs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
