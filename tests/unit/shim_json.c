/* Unit tests of the fixed-buffer JSON builder: exact output, escaping (quotes, control bytes,
 * invalid UTF-8), nesting, overflow and misuse marking the line bad. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "shim/base/json.h"

static struct cg_json j;

/* The line without the "t" and "pid" members, whose values vary. */
static const char *line_without_t(void)
{
	static char out[CG_JSON_CAP];
	size_t len;
	const char *line = cg_json_line(&j, &len);
	assert_non_null(line);
	assert_int_equal(line[len - 1], '\n');
	const char *t = strstr(line, ",\"t\":");
	assert_non_null(t);
	const char *after = t + 5 + strspn(t + 5, "0123456789.e-");
	assert_true(strncmp(after, ",\"pid\":", 7) == 0);
	after += 7 + strspn(after + 7, "0123456789");
	size_t head = (size_t)(t - line);
	memcpy(out, line, head);
	memcpy(out + head, after, len - (size_t)(after - line));
	out[head + len - (size_t)(after - line)] = '\0';
	return out;
}

static void test_scalars(void **state)
{
	cg_json_begin(&j, "summary");
	cg_json_str(&j, "s", "abc");
	cg_json_int(&j, "i", -42);
	cg_json_uint(&j, "u", UINT64_MAX);
	cg_json_double(&j, "d", 0.25);
	cg_json_double(&j, "nan", NAN);
	cg_json_bool(&j, "b", true);
	cg_json_hex(&j, "h", 0xdeadbeef);
	cg_json_null(&j, "n");
	cg_json_str(&j, "nullstr", NULL);
	assert_true(cg_json_end(&j));
	assert_string_equal(line_without_t(),
		"{\"event\":\"summary\",\"s\":\"abc\",\"i\":-42,\"u\":18446744073709551615,\"d\":0.25,"
		"\"nan\":null,\"b\":true,\"h\":\"0xdeadbeef\",\"n\":null,\"nullstr\":null}\n");
	assert_true(cg_json_end(&j));   /* idempotent */
}

static void test_escaping(void **state)
{
	cg_json_begin(&j, "e");
	cg_json_str(&j, "k\"ey", "a\"b\\c\nd\te\x01" "f\x7f");
	cg_json_str(&j, "utf8", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	cg_json_str(&j, "bad", "x\xff" "y\xc3" "z\xe0\x80\x80" "w\xed\xa0\x80");
	assert_true(cg_json_end(&j));
	assert_string_equal(line_without_t(),
		"{\"event\":\"e\",\"k\\\"ey\":\"a\\\"b\\\\c\\nd\\te\\u0001f\x7f\","
		"\"utf8\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\","
		"\"bad\":\"x\\ufffdy\\ufffdz\\ufffd\\ufffd\\ufffdw\\ufffd\\ufffd\\ufffd\"}\n");
}

static void test_nesting(void **state)
{
	cg_json_begin(&j, "fallback");
	cg_json_obj(&j, "expected");
	cg_json_int(&j, "grid", 1);
	cg_json_obj(&j, "inner");
	cg_json_obj_end(&j);
	cg_json_obj_end(&j);
	cg_json_arr(&j, "bt");
	cg_json_arr_str(&j, "f+0x1 (lib.so)");
	cg_json_arr_uint(&j, 7);
	cg_json_obj(&j, NULL);
	cg_json_str(&j, "name", "k");
	cg_json_obj_end(&j);
	cg_json_arr(&j, NULL);
	cg_json_arr_end(&j);
	cg_json_arr_end(&j);
	cg_json_int(&j, "count", 2);
	assert_true(cg_json_end(&j));
	assert_string_equal(line_without_t(),
		"{\"event\":\"fallback\",\"expected\":{\"grid\":1,\"inner\":{}},"
		"\"bt\":[\"f+0x1 (lib.so)\",7,{\"name\":\"k\"},[]],\"count\":2}\n");
}

static void test_overflow(void **state)
{
	static char big[1000];
	memset(big, 'x', sizeof big - 1);
	cg_json_begin(&j, "big");
	cg_json_arr(&j, "a");
	int i;
	for (i = 0; i < 100 && !j.bad; i++)
		cg_json_arr_str(&j, big);
	assert_true(j.bad);
	assert_true(j.len <= CG_JSON_CAP);
	cg_json_arr_end(&j);
	assert_false(cg_json_end(&j));
	size_t len;
	assert_null(cg_json_line(&j, &len));

	/* Deep nesting at the limit: once full, every later write is refused. */
	cg_json_begin(&j, "fill");
	for (int d = 0; d < CG_JSON_DEPTH; d++)
		cg_json_arr(&j, d == 0 ? "a" : NULL);
	while (!j.bad)
		cg_json_arr_uint(&j, 1);
	assert_true(j.len <= CG_JSON_CAP - (CG_JSON_DEPTH + 2));
	for (int d = 0; d < CG_JSON_DEPTH; d++)
		cg_json_arr_end(&j);
	assert_false(cg_json_end(&j));

	/* A record that fills the buffer exactly still closes (the reserve holds the brackets);
	 * one byte more is refused. */
	static char fill[CG_JSON_CAP];
	for (int extra = 0; extra <= 1; extra++) {
		cg_json_begin(&j, "fit");
		cg_json_arr(&j, "a");
		size_t n = CG_JSON_CAP - (CG_JSON_DEPTH + 2) - j.len - 2 + (size_t)extra;
		memset(fill, 'y', n);
		fill[n] = '\0';
		cg_json_arr_str(&j, fill);
		cg_json_arr_end(&j);
		assert_int_equal(cg_json_end(&j), extra == 0);
		if (extra == 0) {
			const char *line = cg_json_line(&j, &len);
			assert_non_null(line);
			assert_int_equal(len, CG_JSON_CAP - CG_JSON_DEPTH + 1);
			assert_memory_equal(line + len - 5, "y\"]}\n", 5);
		}
	}
}

static void test_misuse(void **state)
{
	cg_json_begin(&j, "open");
	cg_json_obj(&j, "o");
	assert_false(cg_json_end(&j));   /* left open */

	cg_json_begin(&j, "close");
	cg_json_arr_end(&j);
	assert_false(cg_json_end(&j));   /* closed more than opened */

	cg_json_begin(&j, "deep");
	for (int d = 0; d <= CG_JSON_DEPTH; d++)
		cg_json_obj(&j, "x");
	assert_true(j.bad);

	/* begin resets a bad record */
	cg_json_begin(&j, "again");
	assert_true(cg_json_end(&j));
}

/* Record buffers come from a pool, not the caller's stack: distinct while taken, reused once
 * given back. */
static void test_buffers_taken_and_given(void **state)
{
	struct cg_json *t[8];
	for (int i = 0; i < 8; i++) {
		t[i] = cg_json_take();
		for (int k = 0; k < i; k++)
			assert_ptr_not_equal(t[i], t[k]);
		cg_json_begin(t[i], "x");
	}
	cg_json_give(t[3]);
	assert_ptr_equal(cg_json_take(), t[3]);
	for (int i = 0; i < 8; i++)
		cg_json_give(t[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buffers_taken_and_given),
		cmocka_unit_test(test_scalars),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_nesting),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_misuse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
