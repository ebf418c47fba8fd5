/* Profile mode's GPU busy time (shim/observers/busy.h): the union of kernel/copy intervals per device,
 * clipped to the window, the busiest device reported; and the host's launch calls that the
 * device spent idle. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "shim/observers/busy.h"

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

static void test_idle_in_launch_calls(void **state)
{
	(void)state;
	/* Launch calls [0,10) and [20,30); the device busy [5,25): idle under them 5 + 5. */
	struct cg_span gpu[] = { { 0, 5, 25 } }, host[] = { { 0, 20, 30 }, { 0, 0, 10 } };
	assert_int_equal(cg_busy_idle_in(gpu, 1, host, 2, 0, 0, 100), 10);
	/* Two threads in launch calls at once ([0,10) and [5,15)) count once; device 1's work does
	 * not hide device 0's idle time; without a device every launch call's time is idle. */
	struct cg_span gpu1[] = { { 1, 0, 100 }, { 0, 12, 13 } };
	struct cg_span two[] = { { 0, 0, 10 }, { 7, 5, 15 } };
	assert_int_equal(cg_busy_idle_in(gpu1, 2, two, 2, 0, 0, 100), 14);
	struct cg_span two_again[] = { { 0, 0, 10 }, { 7, 5, 15 } };
	assert_int_equal(cg_busy_idle_in(NULL, 0, two_again, 2, -1, 0, 100), 15);
}

static void test_idle_window_and_many_spans(void **state)
{
	(void)state;
	/* The window [8, 28] clips launch calls [0,10) and [20,30) to 2 + 8; the device's spans
	 * [9,21) (two of them overlapping) cover 1 + 1 of that. */
	struct cg_span gpu[] = { { 0, 9, 15 }, { 0, 14, 21 }, { 0, 40, 50 } };
	struct cg_span host[] = { { 0, 0, 10 }, { 0, 20, 30 } };
	assert_int_equal(cg_busy_idle_in(gpu, 3, host, 2, 0, 8, 28), 8);
	/* A device span reaching over two launch calls covers both. */
	struct cg_span wide[] = { { 0, 0, 100 } }, calls[] = { { 0, 10, 20 }, { 0, 30, 40 }, { 0, 110, 120 } };
	assert_int_equal(cg_busy_idle_in(wide, 1, calls, 3, 0, 0, 1000), 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_disjoint_and_overlapping),
		cmocka_unit_test(test_nested_and_touching),
		cmocka_unit_test(test_window_clips),
		cmocka_unit_test(test_busiest_device),
		cmocka_unit_test(test_idle_in_launch_calls),
		cmocka_unit_test(test_idle_window_and_many_spans),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
