/* Unit tests of the options table: the bool/int/level parsers against hostile values, the
 * environment reload (a bad value keeps the default and warns once), CUGRAFT_SCOPE, and the
 * logging the options drive (level filter, repeat cap, once per key, long lines, errno). */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "shim/base/json.h"
#include "shim/base/log.h"
#include "shim/base/options.h"

static void test_bool(void **state)
{
	static const char *const yes[] = { "1", "true", "TRUE", "Yes", "on" };
	static const char *const no[] = { "0", "false", "no", "OFF" };
	static const char *const bad[] = { "", "2", "-1", "y", "truee", " 1", "1 ", "enable" };
	bool b;
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		b = false;
		assert_int_equal(cg_parse_bool(yes[i], &b), 0);
		assert_true(b);
	}
	for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
		b = true;
		assert_int_equal(cg_parse_bool(no[i], &b), 0);
		assert_false(b);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		b = true;
		assert_int_equal(cg_parse_bool(bad[i], &b), -EINVAL);
		assert_true(b);   /* untouched */
	}
}

static void test_int(void **state)
{
	long long v;
	assert_int_equal(cg_parse_int("64", 1, 1000, &v), 0);
	assert_int_equal(v, 64);
	assert_int_equal(cg_parse_int("+7", 1, 1000, &v), 0);
	assert_int_equal(v, 7);
	assert_int_equal(cg_parse_int("2k", 0, LLONG_MAX, &v), 0);
	assert_int_equal(v, 2000);
	assert_int_equal(cg_parse_int("3M", 0, LLONG_MAX, &v), 0);
	assert_int_equal(v, 3000000);
	assert_int_equal(cg_parse_int("5G", 0, LLONG_MAX, &v), 0);
	assert_int_equal(v, 5000000000ll);

	static const char *const bad[] = { "", "abc", "1e99", "12Q", "0x10", " 12", "12 ", "-", "+",
	                                   "K", "1KB", "1.5", "--1", "1k2" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		v = 12345;
		assert_int_equal(cg_parse_int(bad[i], 0, 100, &v), -EINVAL);
		assert_int_equal(v, 12345);
	}
	/* Out of range, overflow included: clamped, -ERANGE. */
	assert_int_equal(cg_parse_int("-5", 0, 100, &v), -ERANGE);
	assert_int_equal(v, 0);
	assert_int_equal(cg_parse_int("101", 0, 100, &v), -ERANGE);
	assert_int_equal(v, 100);
	assert_int_equal(cg_parse_int("99999999999999999999999", 0, 100, &v), -ERANGE);
	assert_int_equal(v, 100);
	assert_int_equal(cg_parse_int("9999999999G", 0, LLONG_MAX, &v), -ERANGE);
	assert_true(v == LLONG_MAX);
	assert_int_equal(cg_parse_int("-99999999999999999999", LLONG_MIN, 0, &v), -ERANGE);
	assert_true(v == LLONG_MIN);
}

static void test_level(void **state)
{
	int l = -1;
	assert_int_equal(cg_parse_level("DEBUG", &l), 0);
	assert_int_equal(l, CG_LOG_DEBUG);
	assert_int_equal(cg_parse_level("warning", &l), 0);
	assert_int_equal(l, CG_LOG_WARN);
	assert_int_equal(cg_parse_level("loud", &l), -EINVAL);
	assert_int_equal(cg_parse_level("", &l), -EINVAL);
}

/* Every default in options.def must parse as its own kind. */
static void test_defaults_valid(void **state)
{
	for (int o = 0; o < CG_OPT_COUNT; o++) {
		const struct cg_opt_info *in = cg_opt_info((enum cg_opt)o);
		assert_true(strncmp(in->name, "CUGRAFT_", 8) == 0);
		assert_true(in->doc[0] != '\0');
		bool b;
		long long v;
		int l;
		struct cg_scope sc;
		switch (in->kind) {
		case CG_OPT_KIND_BOOL: assert_int_equal(cg_parse_bool(in->def, &b), 0); break;
		case CG_OPT_KIND_INT: assert_int_equal(cg_parse_int(in->def, in->min, in->max, &v), 0); break;
		case CG_OPT_KIND_LEVEL: assert_int_equal(cg_parse_level(in->def, &l), 0); break;
		case CG_OPT_KIND_STR:
			if (o == CG_OPT_SCOPE)
				assert_int_equal(cg_scope_parse(in->def, &sc, NULL), 0);
			break;
		}
	}
}

/* Runs cg_options_reload with stderr captured into buf. */
static void reload_capture(char *buf, size_t size)
{
	fflush(stderr);
	FILE *tmp = tmpfile();
	assert_non_null(tmp);
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	cg_options_reload();
	dup2(saved, 2);
	close(saved);
	size_t n = (size_t)pread(fileno(tmp), buf, size - 1, 0);
	buf[n < size ? n : 0] = '\0';
	fclose(tmp);
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void test_env(void **state)
{
	char err[4096];
	cg_options_init();
	setenv("CUGRAFT_CHUNK", "12Q", 1);
	setenv("CUGRAFT_WARMUP", "11", 1);
	setenv("CUGRAFT_DISABLE", "yes", 1);
	setenv("CUGRAFT_REPORT", "/tmp/r-%p.jsonl", 1);
	reload_capture(err, sizeof err);
	assert_int_equal(cg_opt_int(CG_OPT_CHUNK), 64);
	assert_int_equal(cg_opt_int(CG_OPT_WARMUP), 11);
	assert_true(cg_opt_bool(CG_OPT_DISABLE));
	assert_string_equal(cg_opt_str(CG_OPT_REPORT), "/tmp/r-%p.jsonl");
	assert_int_equal(count_lines(err), 1);
	assert_non_null(strstr(err, "cugraft: warning: CUGRAFT_CHUNK=12Q ignored"));
	assert_non_null(strstr(err, "\"64\""));

	/* Clamped: warns with the value used. */
	setenv("CUGRAFT_CHUNK", "-3", 1);
	reload_capture(err, sizeof err);
	assert_int_equal(cg_opt_int(CG_OPT_CHUNK), 1);
	assert_non_null(strstr(err, "using 1"));

	/* CUGRAFT_LOG=error silences the warnings about the others, whatever their order. */
	setenv("CUGRAFT_LOG", "error", 1);
	setenv("CUGRAFT_CHUNK", "junk", 1);
	setenv("CUGRAFT_SCOPE", "bogus", 1);
	reload_capture(err, sizeof err);
	assert_string_equal(err, "");
	assert_string_equal(cg_opt_str(CG_OPT_LOG), "error");
	assert_true(cg_opt_scope()->kernels && cg_opt_scope()->memops);

	setenv("CUGRAFT_LOG", "chatty", 1);
	reload_capture(err, sizeof err);
	assert_string_equal(cg_opt_str(CG_OPT_LOG), "warn");
	assert_non_null(strstr(err, "CUGRAFT_LOG=chatty ignored"));
	assert_non_null(strstr(err, "CUGRAFT_SCOPE=bogus ignored: unknown word"));

	static const char *const vars[] = { "CUGRAFT_CHUNK", "CUGRAFT_WARMUP", "CUGRAFT_DISABLE",
	                                    "CUGRAFT_REPORT", "CUGRAFT_LOG", "CUGRAFT_SCOPE" };
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
	reload_capture(err, sizeof err);
	assert_false(cg_opt_bool(CG_OPT_DISABLE));
}

static void test_options_json(void **state)
{
	static struct cg_json j;
	cg_options_reload();
	cg_json_begin(&j, "header");
	cg_options_json(&j);
	assert_true(cg_json_end(&j));
	size_t len;
	const char *line = cg_json_line(&j, &len);
	assert_non_null(strstr(line, ",\"options\":{\"CUGRAFT_DISABLE\":false,\"CUGRAFT_WARMUP\":2,"));
	assert_non_null(strstr(line, "\"CUGRAFT_SCOPE\":\"kernels,memops\""));
	assert_non_null(strstr(line, "\"CUGRAFT_LOG\":\"warn\""));
	assert_non_null(strstr(line, "\"CUGRAFT_RECORD_ONLY\":false,\"CUGRAFT_PROFILE\":false}}\n"));
}

static void test_scope(void **state)
{
	struct cg_scope sc;
	const char *why = NULL;

	assert_int_equal(cg_scope_parse("kernels,memops", &sc, NULL), 0);
	assert_true(sc.kernels && sc.memops && !sc.collectives);
	assert_true(cg_scope_match_kernel(&sc, "anything"));
	assert_true(cg_scope_match_stream(&sc, 12345));

	/* +/- items modify the default. */
	assert_int_equal(cg_scope_parse("+collectives", &sc, NULL), 0);
	assert_true(sc.kernels && sc.memops && sc.collectives);
	assert_int_equal(cg_scope_parse("-memops", &sc, NULL), 0);
	assert_true(sc.kernels && !sc.memops);

	/* Bare words replace it. */
	assert_int_equal(cg_scope_parse("memops", &sc, NULL), 0);
	assert_true(!sc.kernels && sc.memops);
	assert_false(cg_scope_match_kernel(&sc, "gemm"));

	/* Patterns: +glob restricts, -glob excludes and wins. */
	assert_int_equal(cg_scope_parse("+*gemm*,+ampere_*,-*splitk*", &sc, NULL), 0);
	assert_true(cg_scope_match_kernel(&sc, "sm90_xmma_gemm_f16"));
	assert_true(cg_scope_match_kernel(&sc, "ampere_sgemm_128x64"));
	assert_false(cg_scope_match_kernel(&sc, "softmax_fwd"));
	assert_false(cg_scope_match_kernel(&sc, "gemm_splitk_reduce"));
	assert_int_equal(cg_scope_parse("kernels,-nccl*", &sc, NULL), 0);
	assert_false(sc.memops);
	assert_true(cg_scope_match_kernel(&sc, "layernorm"));
	assert_false(cg_scope_match_kernel(&sc, "ncclDevKernel_AllReduce"));

	/* Streams. */
	assert_int_equal(cg_scope_parse("kernels,streams=7|0x10,memops", &sc, NULL), 0);
	assert_int_equal(sc.n_streams, 2);
	assert_true(sc.memops);
	assert_true(cg_scope_match_stream(&sc, 7));
	assert_true(cg_scope_match_stream(&sc, 16));
	assert_false(cg_scope_match_stream(&sc, 8));

	/* Hostile values: an error names why and leaves *out alone. */
	static const char *const bad[] = { "kernel", "streams=", "streams=7|", "streams=a",
	                                   "streams=7;8", "+", "-", "kernels,,fast" };
	sc.kernels = false;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why = NULL;
		assert_int_equal(cg_scope_parse(bad[i], &sc, &why), -EINVAL);
		assert_non_null(why);
		assert_false(sc.kernels);
	}
	char longpat[300];
	memset(longpat, 'a', sizeof longpat);
	longpat[0] = '+';
	longpat[sizeof longpat - 1] = '\0';
	assert_int_equal(cg_scope_parse(longpat, &sc, &why), -EINVAL);
}

/* Every integer option takes both ends of its documented range as given, and a value beyond
 * an end is clamped in the table, with a warning naming the value used: what the header and
 * the log show is what the engine uses. CUGRAFT_CHUNK's end is the engine's largest chunk. */
static void test_int_ranges(void **state)
{
	char err[4096], text[32];
	for (int o = 0; o < CG_OPT_COUNT; o++) {
		const struct cg_opt_info *in = cg_opt_info((enum cg_opt)o);
		if (in->kind != CG_OPT_KIND_INT)
			continue;
		const long long ends[] = { in->min, in->max };
		for (size_t e = 0; e < 2; e++) {
			snprintf(text, sizeof text, "%lld", ends[e]);
			setenv(in->name, text, 1);
			reload_capture(err, sizeof err);
			assert_int_equal(cg_opt_int((enum cg_opt)o), ends[e]);
			assert_string_equal(err, "");
		}
		unsetenv(in->name);
	}
	setenv("CUGRAFT_CHUNK", "100000", 1);
	reload_capture(err, sizeof err);
	assert_int_equal(cg_opt_int(CG_OPT_CHUNK), 65536);
	assert_non_null(strstr(err, "CUGRAFT_CHUNK=100000 is outside [1, 65536]; using 65536"));
	setenv("CUGRAFT_CHUNK", "1", 1);
	reload_capture(err, sizeof err);
	assert_int_equal(cg_opt_int(CG_OPT_CHUNK), 1);
	unsetenv("CUGRAFT_CHUNK");
	cg_options_reload();
}

/* Stream ids are decimal or 0x hex, as documented: a leading 0 is not octal. */
static void test_scope_streams_base(void **state)
{
	struct cg_scope sc;
	const char *why = NULL;
	assert_int_equal(cg_scope_parse("streams=010|09|0x1f|0", &sc, &why), 0);
	assert_int_equal(sc.n_streams, 4);
	assert_int_equal(sc.streams[0], 10);
	assert_int_equal(sc.streams[1], 9);
	assert_int_equal(sc.streams[2], 31);
	assert_int_equal(sc.streams[3], 0);
	assert_false(cg_scope_match_stream(&sc, 8));
	static const char *const bad[] = { "streams=0x", "streams=0xg", "streams=1a", "streams=0b1",
	                                   "streams=-1", "streams=18446744073709551616" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		why = NULL;
		assert_int_equal(cg_scope_parse(bad[i], &sc, &why), -EINVAL);
		assert_non_null(why);
	}
	assert_int_equal(cg_scope_parse("streams=1a", &sc, &why), -EINVAL);
	assert_non_null(strstr(why, "decimal or 0x hex"));
}

/* Runs fn with stderr captured into buf. */
static void capture(void (*fn)(void), char *buf, size_t size)
{
	fflush(stderr);
	FILE *tmp = tmpfile();
	assert_non_null(tmp);
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	fn();
	dup2(saved, 2);
	close(saved);
	ssize_t n = pread(fileno(tmp), buf, size - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	fclose(tmp);
}

static void log_levels(void)
{
	cg_log_set_level(CG_LOG_WARN);
	cg_log(CG_LOG_INFO, "hidden %d", 1);
	cg_log(CG_LOG_WARN, "shown %d", 2);
	cg_log(CG_LOG_ERROR, "bad %s", "x");
	cg_log_set_level(CG_LOG_DEBUG);
	cg_log(CG_LOG_DEBUG, "dbg");
	cg_log_set_level(CG_LOG_WARN);
}

static void log_repeats(void)
{
	for (int i = 0; i < CG_LOG_REPEAT_MAX + 5; i++)
		cg_log(CG_LOG_WARN, "again %d", i);
	for (int i = 0; i < 3; i++) {
		cg_warn_once(7, "key seven %d", i);
		cg_warn_once(8, "key eight %d", i);
	}
}

static void log_long(void)
{
	static char big[3 * CG_LOG_LINE];
	memset(big, 'z', sizeof big - 1);
	errno = EAGAIN;
	cg_log(CG_LOG_WARN, "%s", big);
	assert_int_equal(errno, EAGAIN);
}

static void test_log(void **state)
{
	char err[8192];
	capture(log_levels, err, sizeof err);
	assert_string_equal(err, "cugraft: warning: shown 2\ncugraft: error: bad x\ncugraft: debug: dbg\n");

	capture(log_repeats, err, sizeof err);
	assert_int_equal(count_lines(err), CG_LOG_REPEAT_MAX + 2);
	assert_non_null(strstr(err, "again 9 (repeated; further ones suppressed)\n"));
	assert_null(strstr(err, "again 10"));
	assert_non_null(strstr(err, "key seven 0\n"));
	assert_non_null(strstr(err, "key eight 0\n"));
	assert_null(strstr(err, "key seven 1"));

	capture(log_long, err, sizeof err);
	assert_int_equal(strlen(err), CG_LOG_LINE);
	assert_int_equal(count_lines(err), 1);
	assert_memory_equal(err + CG_LOG_LINE - 4, "...\n", 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bool),
		cmocka_unit_test(test_int),
		cmocka_unit_test(test_level),
		cmocka_unit_test(test_defaults_valid),
		cmocka_unit_test(test_env),
		cmocka_unit_test(test_options_json),
		cmocka_unit_test(test_scope),
		cmocka_unit_test(test_int_ranges),
		cmocka_unit_test(test_scope_streams_base),
		cmocka_unit_test(test_log),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
