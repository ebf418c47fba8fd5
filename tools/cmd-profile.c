/* `cugraft profile -- CMD ARGS...`: runs CMD with the library in record-only mode (it learns
 * and counts but never defers) and prints what the summary supports about the job's shape:
 * launches and syncs per iteration and the share of ops that repeat. Estimates say so. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cugraft.h"
#include "reportfile.h"

/* Reads and removes every report the job's processes wrote into dir. */
static void cg_profile_collect(const char *dir, struct cg_merged *m)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char path[4096 + 2 + sizeof e->d_name];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		struct cg_rfile f;
		if (cg_rfile_load(&f, path)) {
			if (f.summary != NULL || f.n_fallbacks > 0)
				cg_merged_add(m, &f);
			cg_rfile_free(&f);
		}
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

static void cg_profile_print(const struct cg_merged *m)
{
	printf("cugraft profile (record-only: nothing was deferred or graphed)\n");
	if (m->files == 0 || m->partial == m->files) {
		printf("  no summary was written: the program did not use CUDA, or did not exit normally\n");
		return;
	}
	double launches = cg_merged_total(m, "launches", 0), ops = cg_merged_total(m, "ops", 0);
	const struct cg_counts *b = cg_merged_map(m, "boundaries");
	double syncs = 0;
	for (size_t i = 0; b && i < b->n; i++)
		if (strcmp(b->names[i], "sync") == 0)
			syncs = b->counts[i];
	double iters = cg_merged_total(m, "iterations_estimate", 0);
	const char *iters_from = "the summary's iterations_estimate";
	if (iters <= 0 && syncs > 0) {
		iters = syncs;
		iters_from = "one iteration per sync point (assumed)";
	}
	printf("  processes with CUDA work   %zu\n", m->files);
	printf("  ops / launches             %.0f / %.0f\n", ops, launches);
	if (iters > 0) {
		printf("  iterations (estimate)      %.0f, from %s\n", iters, iters_from);
		printf("  launches per iteration     %.1f (estimate)\n", launches / iters);
		if (cg_merged_total(m, "iterations_estimate", 0) > 0)
			printf("  syncs per iteration        %.1f (estimate)\n", syncs / iters);
	} else {
		printf("  iterations                 unknown (no sync points and no iterations_estimate)\n");
	}
	double replayable = cg_merged_total(m, "ops_replayable", -1);
	if (replayable >= 0 && ops > 0) {
		double share = replayable / ops;
		printf("  learnable share            %.1f%% of ops repeat (ops_replayable / ops)\n", 100 * share);
		double per_iter = iters > 0 ? launches / iters : 0;
		printf("  rough verdict              %s\n",
		       share < 0.5 ? "little repeats: graphs will help little" :
		       per_iter >= 100 ? "many launches per iteration that repeat: graphs are likely to help" :
		       "the work repeats but iterations launch little: expect a small gain");
	} else {
		printf("  learnable share            not in this report (run `cugraft run` and read its report)\n");
	}
}

int cg_cmd_profile(int argc, char **argv)
{
	int i = 1;
	if (i < argc && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
		printf("usage: cugraft profile -- CMD ARGS...\n"
		       "Runs CMD with CUGRAFT_RECORD_ONLY=1 and prints launches and syncs per iteration.\n");
		return 0;
	}
	if (i < argc && strcmp(argv[i], "--") == 0)
		i++;
	if (i >= argc) {
		fprintf(stderr, "usage: cugraft profile -- CMD ARGS...\n");
		return 2;
	}
	char *lib = cg_tool_library();
	if (lib == NULL) {
		fprintf(stderr, "cugraft profile: libcugraft.so not found (neither next to this build nor at %s)\n",
		        CG_INSTALLED_LIB);
		return 1;
	}
	const char *tmp = getenv("TMPDIR");
	char dir[4096], pattern[4200];
	snprintf(dir, sizeof dir, "%s/cugraft-profile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL) {
		perror("cugraft profile: mkdtemp");
		return 1;
	}
	snprintf(pattern, sizeof pattern, "%s/%%p.jsonl", dir);
	struct cg_env env[] = {
		{ "LD_PRELOAD", cg_preload_value(lib) },
		{ "CUGRAFT_RECORD_ONLY", "1" },
		{ "CUGRAFT_REPORT", pattern },
	};
	int status = cg_spawn(argv + i, env, sizeof env / sizeof env[0], NULL);
	struct cg_merged m = { 0 };
	cg_profile_collect(dir, &m);
	cg_profile_print(&m);
	cg_merged_free(&m);
	return status;
}
