/* Unit tests of the report writer: %p/%r expansion, the rate limiter, records written whole by
 * concurrent threads, the suppressed counts and summary at finish, the unwritable-path fallback
 * to a stderr summary, silence in a process that never started a report, and backtraces. Scenarios that
 * need the once-guards fresh run in a forked child; the parent checks what it left behind. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "shim/base/backtrace.h"
#include "shim/base/json.h"
#include "shim/base/options.h"
#include "shim/base/report.h"

static char dir[] = "/tmp/cg-report-test-XXXXXX";

static void test_expand(void **state)
{
	char out[64];
	assert_int_equal(cg_report_expand("r-%p-%r.jsonl", 123, 4, out, sizeof out), 0);
	assert_string_equal(out, "r-123-4.jsonl");
	assert_int_equal(cg_report_expand("100%%-%x-%", 1, 0, out, sizeof out), 0);
	assert_string_equal(out, "100%-%x-%");
	assert_int_equal(cg_report_expand("%r%r", 1, 17, out, sizeof out), 0);
	assert_string_equal(out, "1717");
	assert_int_equal(cg_report_expand("abcdef%p", 1234, 0, out, 10), -ENAMETOOLONG);
	assert_int_equal(cg_report_expand("abcdef%p", 123, 0, out, 10), 0);
}

static void test_rate_limit(void **state)
{
	char kind[] = "fallback";
	for (int i = 0; i < 3; i++)
		assert_true(cg_report_first("fallback", 42, 3));
	assert_false(cg_report_first(kind, 42, 3));   /* same kind by content */
	assert_true(cg_report_first("fallback", 43, 3));
	assert_true(cg_report_first("escaped", 42, 1));
	assert_false(cg_report_first("escaped", 42, 1));
	assert_false(cg_report_first("never", 1, 0));
}

/* Runs fn in a child with stderr sent to err_path; returns its exit status. */
static int in_child(void (*fn)(void), const char *err_path, pid_t *child)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (freopen(err_path, "w", stderr) == NULL)
			_exit(99);
		fn();
		fflush(NULL);
		_exit(0);
	}
	if (child != NULL)
		*child = pid;
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return NULL;
	static char buf[4 << 20];
	*len = fread(buf, 1, sizeof buf - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

static void summary(struct cg_json *j)
{
	cg_json_begin(j, "summary");
	cg_json_uint(j, "ops", 1000);
	cg_json_uint(j, "ops_replayed", 900);
	cg_json_uint(j, "graph_launches", 15);
	cg_json_uint(j, "ops_eager", 100);
	cg_json_double(j, "host_time_saved_us", 2500);
	cg_json_obj(j, "fallbacks");
	cg_json_uint(j, "sync", 7);
	cg_json_uint(j, "divergence", 2);
	cg_json_obj_end(j);
	cg_json_arr(j, "kernels");
	cg_json_obj(j, NULL);
	cg_json_str(j, "name", "k");
	cg_json_uint(j, "ops", 5);
	cg_json_obj_end(j);
	cg_json_arr_end(j);
}

#define THREADS 4
#define PER_THREAD 200

static void *emitter(void *arg)
{
	static __thread struct cg_json j;
	static char pad[3000];
	memset(pad, 'p', sizeof pad - 1);
	for (int i = 0; i < PER_THREAD; i++) {
		cg_json_begin(&j, "region");
		cg_json_uint(&j, "thread", (uintptr_t)arg);
		cg_json_str(&j, "pad", pad);
		cg_report_emit(&j);
	}
	return NULL;
}

static void child_writer(void)
{
	static struct cg_json j;
	char pattern[256];
	snprintf(pattern, sizeof pattern, "%s/r-%%p-%%r.jsonl", dir);
	setenv("CUGRAFT_REPORT", pattern, 1);
	setenv("RANK", "5", 1);
	cg_options_reload();
	cg_report_emit(&j);   /* before start: nothing, no crash */
	cg_report_start();
	if (!cg_report_active())
		_exit(2);
	pthread_t t[THREADS];
	for (uintptr_t i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, emitter, (void *)i);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	/* A record too long is dropped, never written truncated. */
	static char huge[CG_JSON_CAP];
	memset(huge, 'h', sizeof huge - 1);
	cg_json_begin(&j, "huge");
	cg_json_str(&j, "h", huge);
	cg_report_emit(&j);
	for (int i = 0; i < 5; i++)
		cg_report_first("fallback", 9, 2);
	summary(&j);
	cg_report_finish(&j);
	cg_report_finish(&j);   /* once */
}

static void test_writer(void **state)
{
	char err[512], path[512];
	snprintf(err, sizeof err, "%s/writer.err", dir);
	pid_t pid;
	assert_int_equal(in_child(child_writer, err, &pid), 0);
	size_t len;
	snprintf(path, sizeof path, "%s/r-%d-5.jsonl", dir, (int)pid);
	char *text = slurp(path, &len);
	assert_non_null(text);
	int lines = 0, regions = 0, suppressed = 0, suppressed9 = 0, summaries = 0;
	for (char *line = text; *line; ) {
		char *nl = strchr(line, '\n');
		assert_non_null(nl);   /* every record ends its line */
		*nl = '\0';
		lines++;
		assert_true(strncmp(line, "{\"event\":\"", 10) == 0);
		assert_int_equal(nl[-1], '}');
		if (strstr(line, "\"event\":\"region\"")) {
			regions++;
			const char *pad = strstr(line, "\"pad\":\"");
			assert_non_null(pad);
			assert_int_equal(strspn(pad + 7, "p"), 2999);
			assert_string_equal(pad + 7 + 2999, "\"}");
		}
		if (strstr(line, "\"event\":\"suppressed\"")) {
			/* the child inherited test_rate_limit's counts too */
			suppressed++;
			suppressed9 += strstr(line, "\"kind\":\"fallback\",\"key\":\"0x9\",\"count\":3}") != NULL;
		}
		if (strstr(line, "\"event\":\"summary\""))
			summaries++;
		assert_null(strstr(line, "\"event\":\"huge\""));
		line = nl + 1;
	}
	assert_int_equal(regions, THREADS * PER_THREAD);
	assert_int_equal(suppressed9, 1);
	assert_int_equal(summaries, 1);
	assert_int_equal(lines, THREADS * PER_THREAD + suppressed + 1);
	/* The summary is last, after the suppressed counts. */
	char *tail = slurp(path, &len);
	char *last = tail + len - 1;
	while (last > tail && last[-1] != '\n')
		last--;
	assert_true(strncmp(last, "{\"event\":\"summary\"", 18) == 0);
	/* LOG=warn and a writable file: only the dropped-record warning on stderr. */
	char *e = slurp(err, &len);
	assert_non_null(strstr(e, "cugraft: warning: report record dropped"));
	assert_null(strstr(e, "ops,"));
}

static void child_unwritable(void)
{
	static struct cg_json j;
	setenv("CUGRAFT_REPORT", "/nonexistent-dir/sub/r.jsonl", 1);
	unsetenv("RANK");
	cg_options_reload();
	cg_report_start();
	if (cg_report_active())
		_exit(2);
	cg_json_begin(&j, "region");
	cg_report_emit(&j);
	summary(&j);
	cg_report_finish(&j);
}

static void test_unwritable(void **state)
{
	char err[512];
	snprintf(err, sizeof err, "%s/unwritable.err", dir);
	assert_int_equal(in_child(child_unwritable, err, NULL), 0);
	size_t len;
	char *e = slurp(err, &len);
	assert_non_null(strstr(e, "cugraft: warning: cannot write the report /nonexistent-dir/sub/r.jsonl: No such file or directory"));
	assert_non_null(strstr(e, "cugraft: 1000 ops, 900 replayed from 15 graph launches (90.0%), 100 eager; ~2.5 ms host time saved (estimate)\n"));
	assert_non_null(strstr(e, "cugraft: fallbacks: sync 7 divergence 2\n"));
	/* one warning, the human summary in two lines */
	int n = 0;
	for (char *p = e; *p; p++)
		n += *p == '\n';
	assert_int_equal(n, 3);
}

static void child_info_no_file(void)
{
	static struct cg_json j;
	setenv("CUGRAFT_LOG", "info", 1);
	setenv("SLURM_PROCID", "3", 1);
	unsetenv("CUGRAFT_REPORT");
	cg_options_reload();
	cg_report_start();
	summary(&j);
	cg_report_finish(&j);
}

static void child_never_started(void)
{
	static struct cg_json j;
	setenv("CUGRAFT_LOG", "debug", 1);
	cg_options_reload();
	summary(&j);
	cg_report_finish(&j);
}

static void test_stderr_summary(void **state)
{
	char err[512];
	size_t len;
	snprintf(err, sizeof err, "%s/info.err", dir);
	assert_int_equal(in_child(child_info_no_file, err, NULL), 0);
	char *e = slurp(err, &len);
	assert_true(strncmp(e, "cugraft[rank 3]: 1000 ops, 900 replayed", 39) == 0);

	snprintf(err, sizeof err, "%s/never.err", dir);
	assert_int_equal(in_child(child_never_started, err, NULL), 0);
	e = slurp(err, &len);
	assert_int_equal(len, 0);
}

static __attribute__((noinline)) int capture_inner(void **pcs, int max, int skip)
{
	int n = cg_backtrace_capture(pcs, max, skip);
	__asm__ volatile("" ::: "memory");   /* keep this frame a real call, not a tail call */
	return n;
}

static void test_backtrace(void **state)
{
	void *a[16], *b[16];
	int na = capture_inner(a, 16, 0), nb = capture_inner(b, 16, 1);
#ifdef CG_HAVE_LIBUNWIND
	/* This test program holds the capture code, as libcugraft.so does in a job: its own
	 * innermost frames come off but the outermost, this function (two call sites here), whose
	 * caller is cmocka's runner, another object; `skip` counts only where no other object is
	 * on the stack. */
	assert_true(na >= 2);
	assert_int_equal(nb, na);
	assert_true((uintptr_t)a[0] - (uintptr_t)test_backtrace < 4096);
	assert_true((uintptr_t)b[0] - (uintptr_t)test_backtrace < 4096);
	assert_ptr_not_equal(a[0], b[0]);
	assert_ptr_equal(a[1], b[1]);
	Dl_info caller;
	assert_true(dladdr((void *)((uintptr_t)a[1] - 1), &caller) && caller.dli_fname);
	assert_non_null(strstr(caller.dli_fname, "libcmocka.so"));
	assert_int_equal(capture_inner(a, 1, 0), 1);
	static struct cg_json j;
	cg_json_begin(&j, "fallback");
	cg_json_backtrace(&j, "backtrace", a, na > 16 ? 16 : na);
	assert_true(cg_json_end(&j));
	size_t len;
	const char *line = cg_json_line(&j, &len);
	/* cmocka's runner is exported by libcmocka: named with its library. */
	assert_non_null(strstr(line, ",\"backtrace\":[\""));
	assert_non_null(strstr(line, "+0x"));
	assert_non_null(strstr(line, " (libcmocka.so"));
#else
	assert_int_equal(na, 0);
	assert_int_equal(nb, 0);
#endif
}

static int setup(void **state)
{
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expand),
		cmocka_unit_test(test_rate_limit),
		cmocka_unit_test(test_writer),
		cmocka_unit_test(test_unwritable),
		cmocka_unit_test(test_stderr_summary),
		cmocka_unit_test(test_backtrace),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
