/* Profile mode's GPU busy time (shim/busy.h): the union of kernel/copy intervals per device,
 * clipped to the window, the busiest device reported. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "shim/busy.h"

static void test_disjoint_and_overlapping(void **state)
{
	(void)state;
	/* Two streams: [10,20) and [15,30) overlap (count once), [40,45) alone, [50,50) empty. */
	struct cg_span s[] = { { 0, 40, 45 }, { 0, 15, 30 }, { 0, 10, 20 }, { 0, 50, 50 } };
	int dev;
	assert_int_equal(cg_busy_union(s, 4, 0, 100, &dev), 20 + 5);
	assert_int_equal(dev, 0);
}

static void test_nested_and_touching(void **state)
{
	(void)state;
	/* [0,100) holds [10,20) and [30,40); [100,110) touches it: 110 in all. */
	struct cg_span s[] = { { 0, 10, 20 }, { 0, 0, 100 }, { 0, 30, 40 }, { 0, 100, 110 } };
	int dev;
	assert_int_equal(cg_busy_union(s, 4, 0, 1000, &dev), 110);
}

static void test_window_clips(void **state)
{
	(void)state;
	/* The window [25, 42]: [10,30) gives 5, [40,45) gives 2, [50,60) nothing. */
	struct cg_span s[] = { { 0, 10, 30 }, { 0, 40, 45 }, { 0, 50, 60 } };
	int dev;
	assert_int_equal(cg_busy_union(s, 3, 25, 42, &dev), 5 + 2);
	struct cg_span none[] = { { 0, 50, 60 } };
	assert_int_equal(cg_busy_union(none, 1, 0, 50, &dev), 0);
	assert_int_equal(dev, -1);
}

static void test_busiest_device(void **state)
{
	(void)state;
	/* Device 1 busy 20 + 15, device 0 busy 25 (device 1's spans overlap device 0's in time: each
	 * device counts its own). */
	struct cg_span s[] = { { 1, 0, 10 }, { 0, 0, 25 }, { 1, 5, 20 }, { 1, 50, 65 } };
	int dev;
	assert_int_equal(cg_busy_union(s, 4, 0, 100, &dev), 35);
	assert_int_equal(dev, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_disjoint_and_overlapping),
		cmocka_unit_test(test_nested_and_touching),
		cmocka_unit_test(test_window_clips),
		cmocka_unit_test(test_busiest_device),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
