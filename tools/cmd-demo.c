/* `cugraft demo [--iters N] [--report PATH]`: runs the bundled workload twice, eagerly and under
 * cugraft, and prints both per-iteration times, their ratio, whether the checksums are bitwise
 * equal, and the report's summary. Exit 1 when they differ or a run fails; 77 when the workload
 * (or, without a GPU, the CPU fake driver) is not built. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cugraft.h"
#include "reportfile.h"
#include "policy/reason.h"
#include "shim/base/options.h"

/* In a forked child, so that a broken driver cannot hurt the command. */
static bool cg_demo_have_gpu(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		alarm(30);
		void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		int (*init)(unsigned) = h ? (int (*)(unsigned))dlsym(h, "cuInit") : NULL;
		int (*count)(int *) = h ? (int (*)(int *))dlsym(h, "cuDeviceGetCount") : NULL;
		int n = 0;
		_exit(init && count && init(0) == 0 && count(&n) == 0 && n > 0 ? 0 : 1);
	}
	int status;
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* LD_PRELOAD without any libcugraft entry (the eager run must not be intercepted). NULL: unset. */
static char *cg_demo_preload_without(void)
{
	const char *old = getenv("LD_PRELOAD");
	if (old == NULL)
		return NULL;
	char *copy = strdup(old), *out = calloc(1, strlen(old) + 1), *save = NULL;
	for (char *tok = strtok_r(copy, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save))
		if (strstr(tok, "libcugraft") == NULL) {
			if (*out)
				strcat(out, ":");
			strcat(out, tok);
		}
	free(copy);
	if (*out == '\0') {
		free(out);
		return NULL;
	}
	return out;
}

struct cg_demo_run {
	int status;
	char *out;
	const char *checksums;   /* every "checksum" line, in order, for the bitwise comparison */
	double iter_us;
};

static void cg_demo_parse(struct cg_demo_run *r)
{
	size_t cap = strlen(r->out) + 1, len = 0;
	char *sums = calloc(1, cap);
	r->iter_us = -1;
	for (char *line = r->out; line && *line; ) {
		char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);
		if (strncmp(line, "checksum ", 9) == 0) {
			memcpy(sums + len, line + 9, n - 9);
			len += n - 9;
			sums[len++] = ' ';
		} else if (strncmp(line, "iter_us ", 8) == 0) {
			r->iter_us = strtod(line + 8, NULL);
		}
		line = nl ? nl + 1 : NULL;
	}
	if (len > 0)
		sums[len - 1] = '\0';
	r->checksums = sums;
}

/* Why ops ran eagerly, by count, each with its hint from the one list of reasons (policy/reason.h). */
static void cg_demo_reasons(const struct cg_counts *fb)
{
	for (size_t i = 0; fb && i < fb->n; i++) {
		const char *hint = "";
		for (int r = 0; r < CG_R_COUNT; r++)
			if (strcmp(cg_reason_name((enum cg_reason)r), fb->names[i]) == 0)
				hint = cg_reason_hint((enum cg_reason)r);
		printf("    %8.0f  %s%s%s\n", fb->counts[i], fb->names[i], *hint ? ": " : "", hint);
	}
}

/* --report PATH: one file, named as given (no %p or %r: the demo reads it back by that name).
 * The report appends, so this run's starts afresh there; a file that is not a cugraft report
 * (its first line a header record) is the user's, and stays. True: go on. */
static bool replaceable(const char *path)
{
	struct stat st;
	if (strchr(path, '%') || (stat(path, &st) == 0 && !S_ISREG(st.st_mode))) {
		fprintf(stderr, "cugraft demo: --report %s: want the path of one file (no %%p or %%r)\n",
		        path);
		return false;
	}
	static const char header[] = "{\"event\":\"header\"";
	char head[sizeof header - 1];
	size_t n = cg_file_head(path, head, sizeof head);   /* 0: none there, or empty */
	if (n == 0 || (n == sizeof head && memcmp(head, header, sizeof head) == 0))
		return true;
	fprintf(stderr, "cugraft demo: --report %s: the file is there and is not a cugraft report; "
	        "name another, or remove it\n", path);
	return false;
}

int cg_cmd_demo(int argc, char **argv)
{
	const char *iters = NULL, *report = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
			iters = argv[++i];
		else if (strcmp(argv[i], "--report") == 0 && i + 1 < argc)
			report = argv[++i];
		else {
			fprintf(strcmp(argv[i], "--help") == 0 ? stdout : stderr,
			        "usage: cugraft demo [--iters N] [--report PATH]\n"
			        "Runs the bundled workload eagerly and under cugraft and compares them.\n");
			return strcmp(argv[i], "--help") == 0 ? 0 : 2;
		}
	}
	long long iters_n;
	if (iters && cg_parse_int(iters, 1, 1000000, &iters_n) != 0) {
		fprintf(stderr, "cugraft demo: --iters %s: want an integer in [1, 1000000]\n", iters);
		return 2;
	}
	if (report && !replaceable(report))
		return 2;
	char *work = cg_tool_demo_work();
	char *lib = cg_tool_library();
	if (work == NULL || lib == NULL)   /* (it said where it looked) */
		return 77;
	bool gpu = cg_demo_have_gpu();
	char *ld_path = NULL;
	if (!gpu) {
		char *fake = cg_tool_fake_driver();
		if (fake == NULL) {
			fprintf(stderr, "cugraft demo: no GPU, and the CPU fake driver is not built\n");
			return 77;
		}
		*strrchr(fake, '/') = '\0';
		const char *old = getenv("LD_LIBRARY_PATH");
		if (asprintf(&ld_path, "%s%s%s", fake, old && *old ? ":" : "", old && *old ? old : "") < 0)
			return 1;
		printf("no GPU: both runs use the CPU fake driver (%s),\n"
		       "which runs every kernel on the CPU. The times below compare two CPU simulations:\n"
		       "they are not GPU figures and say nothing of the speedup on a GPU. What this run\n"
		       "does show: whether the results are bitwise equal, and how much of the work\n"
		       "cugraft replayed from graphs.\n\n", fake);
	}

	char *args[8];
	int n = 0;
	args[n++] = work;
	if (iters) {
		args[n++] = "--iters";
		args[n++] = (char *)iters;
	}
	if (!gpu)
		args[n++] = "--no-blas";
	args[n] = NULL;

	char dir[4096], path[4200];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/cugraft-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (report == NULL) {
		if (mkdtemp(dir) == NULL) {
			perror("cugraft demo: mkdtemp");
			return 1;
		}
		snprintf(path, sizeof path, "%s/report.jsonl", dir);
	} else {
		snprintf(path, sizeof path, "%s", report);
		unlink(path);   /* the report appends; start this run's afresh */
	}

	struct cg_env eager_env[] = {
		{ "LD_PRELOAD", cg_demo_preload_without() },
		{ "LD_LIBRARY_PATH", ld_path ? ld_path : getenv("LD_LIBRARY_PATH") },
	};
	struct cg_env graph_env[] = {
		{ "LD_PRELOAD", cg_preload_value(lib) },
		{ "LD_LIBRARY_PATH", ld_path ? ld_path : getenv("LD_LIBRARY_PATH") },
		{ "CUGRAFT_REPORT", path },
	};
	struct cg_demo_run eager = { 0 }, graphed = { 0 };
	eager.status = cg_spawn(args, eager_env, 2, &eager.out);
	graphed.status = cg_spawn(args, graph_env, 3, &graphed.out);
	if (eager.out == NULL || graphed.out == NULL)
		return 1;
	cg_demo_parse(&eager);
	cg_demo_parse(&graphed);

	int status = 0;
	printf("  eager      %10.2f us/iter   exit %d   checksum %s\n", eager.iter_us, eager.status, eager.checksums);
	printf("  cugraft    %10.2f us/iter   exit %d   checksum %s\n", graphed.iter_us, graphed.status, graphed.checksums);
	if (eager.iter_us > 0 && graphed.iter_us > 0)
		printf("  speedup    %.2fx (eager time / cugraft time%s)\n", eager.iter_us / graphed.iter_us,
		       gpu ? "" : "; CPU simulation, not a GPU figure");
	bool equal = eager.checksums[0] != '\0' && strcmp(eager.checksums, graphed.checksums) == 0;
	printf("  results    %s\n", equal ? "bitwise equal" : eager.checksums[0] ? "DIFFERENT" : "no checksum printed");
	if (!equal || eager.status != 0 || graphed.status != 0)
		status = 1;

	struct cg_rfile f;
	struct cg_merged m = { 0 };
	if (access(path, F_OK) == 0 && cg_rfile_load(&f, path)) {
		cg_merged_add_file(&m, &f);
		double ops = cg_merged_total(&m, "ops", 0), replayed = cg_merged_total(&m, "ops_replayed", 0);
		printf("  replayed   %.0f of %.0f ops (%.1f%%) ran inside %.0f graph launches\n", replayed,
		       ops, ops > 0 ? 100.0 * replayed / ops : 0.0, cg_merged_total(&m, "graph_launches", 0));
		const struct cg_counts *fb = cg_merged_map(&m, "fallbacks");
		printf("  the rest   %.0f ops ran eagerly, as the program submitted them%s\n",
		       cg_merged_total(&m, "ops_eager", 0), fb && fb->n ? "; why (ops, reason):" : "");
		cg_demo_reasons(fb);
		cg_rfile_free(&f);
		cg_merged_free(&m);
	} else {
		printf("  report     none written (%s)\n", path);
	}
	if (report == NULL) {
		unlink(path);
		rmdir(dir);
	} else {
		printf("  (report kept: cugraft report %s)\n", path);
	}
	return status;
}
