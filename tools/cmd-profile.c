/* `cugraft profile -- CMD ARGS...`: runs CMD with the library in record-only mode (it learns
 * and counts but never defers) and in profile mode (CUGRAFT_PROFILE: launch-call host time,
 * the sequence of launches and boundaries whose period is the iteration, GPU busy time and the
 * GPU's idle time inside launch calls from CUPTI), and prints the job's shape per iteration and
 * two bounds on what cugraft can gain. Estimates say so. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cugraft.h"
#include "reportfile.h"

/* The summary's "profile":{...} of one process (shim/observers/floor.c). */
struct cg_profile {
	bool found;
	bool iterations_found;    /* else the figures are the whole run's, */
	bool later_half;          /* or the later half of its launch calls' (no iteration found) */
	double wall_us, launch_host_us, launch_calls, iterations, boundaries, syncs;
	double waits;             /* syncs and copies to or from the host, in the window */
	double wait_us, wait_calls;  /* the run's waits: their time and count (< 0: not known) */
	double graph_launches, graph_launched;  /* the program's own graphs, the launches they ran */
	double gpu_busy_us;       /* < 0: unavailable, for the reason in `why` */
	double gpu_idle_in_launch_us;  /* < 0: unknown */
	double idle_untraced_us;  /* the same without what tracing added to launch calls (< 0: unknown) */
	double call_untraced_us, call_traced_us;  /* a launch call of the program (< 0: unknown) */
	char tracing_why[160];    /* why they are unknown */
	double busy_bound, launch_gap_bound;  /* < 0: none (shim/observers/floor.c computes them) */
	double launch_gap_traced; /* the launch-gap bound with tracing's cost in (< 0: none) */
	bool bound_by_gpu;        /* the busy bound is the GPU busy time's, not the launch calls' */
	char why[160];
};

static void cg_profile_read(struct cg_profile *p, const struct jv *summary)
{
	const struct jv *o = jv_get(summary, "profile");
	if (o == NULL || o->type != JV_OBJ)
		return;
	p->found = true;
	const char *window = jv_str(jv_get(o, "window"));
	p->iterations_found = window && strcmp(window, "iterations") == 0;
	p->later_half = window && strcmp(window, "later_half") == 0;
	p->wall_us = jv_num(jv_get(o, "wall_us"), 0);
	p->launch_host_us = jv_num(jv_get(o, "launch_host_us"), 0);
	p->launch_calls = jv_num(jv_get(o, "launch_calls"), 0);
	p->graph_launches = jv_num(jv_get(o, "graph_launches"), 0);
	p->graph_launched = jv_num(jv_get(o, "graph_launched"), 0);
	p->iterations = jv_num(jv_get(o, "iterations"), 0);
	p->boundaries = jv_num(jv_get(o, "period_boundaries"), 0);
	p->syncs = jv_num(jv_get(o, "syncs"), 0);
	p->waits = jv_num(jv_get(o, "waits"), 0);
	p->wait_us = jv_num(jv_get(summary, "wait_call_us"), -1);
	p->wait_calls = jv_num(jv_get(summary, "wait_call_count"), -1);
	p->gpu_busy_us = jv_num(jv_get(o, "gpu_busy_us"), -1);
	p->gpu_idle_in_launch_us = jv_num(jv_get(o, "gpu_idle_in_launch_us"), -1);
	p->idle_untraced_us = jv_num(jv_get(o, "gpu_idle_in_launch_untraced_us"), -1);
	p->call_untraced_us = jv_num(jv_get(o, "launch_untraced_us"), -1);
	p->call_traced_us = jv_num(jv_get(o, "launch_traced_us"), -1);
	const char *tw = jv_str(jv_get(o, "tracing_unmeasured"));
	snprintf(p->tracing_why, sizeof p->tracing_why, "%s", tw ? tw : "not in the report");
	p->busy_bound = jv_num(jv_get(o, "busy_bound"), -1);
	p->launch_gap_bound = jv_num(jv_get(o, "launch_gap_bound"), -1);
	p->launch_gap_traced = jv_num(jv_get(o, "launch_gap_bound_traced"), -1);
	const char *by = jv_str(jv_get(o, "busy_bound_by"));
	p->bound_by_gpu = by && strcmp(by, "gpu_busy") == 0;
	const char *why = jv_str(jv_get(o, "gpu_busy_unavailable"));
	snprintf(p->why, sizeof p->why, "%s", why ? why : "not in the report");
}

/* Whether a process's report shows CUDA work: ops or boundaries. A process can reach the
 * driver and do nothing with it (PyTorch's compile workers look CUDA up); it writes a summary
 * of zeros. A report without a summary has fallback records, hence ops. */
static bool cg_profile_worked(const struct cg_rproc *f)
{
	if (f->summary == NULL)
		return f->n_fallbacks > 0;
	const struct jv *o = jv_get(f->summary, "profile");
	return jv_num(jv_get(f->summary, "ops"), 0) > 0 ||
	       (o != NULL && jv_num(jv_get(o, "boundaries"), 0) > 0);
}

/* Reads and removes every report the job's processes wrote into dir. The profile shown is the
 * process that launched most (one rank of a data-parallel job stands for the others); `worked`
 * counts the processes with CUDA work. */
static void cg_profile_collect(const char *dir, struct cg_merged *m, struct cg_profile *best,
                               size_t *worked)
{
	size_t profiles = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char path[4096 + 2 + sizeof e->d_name];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		struct cg_rfile f;
		bool loaded = cg_rfile_load(&f, path);
		for (size_t i = 0; loaded && i < f.n_procs; i++) {
			const struct cg_rproc *proc = &f.procs[i];
			if (proc->summary != NULL || proc->n_fallbacks > 0)
				cg_merged_add(m, proc);
			*worked += cg_profile_worked(proc);
			struct cg_profile p = { 0 };
			if (proc->summary != NULL)
				cg_profile_read(&p, proc->summary);
			if (p.found && (profiles++ == 0 || p.launch_calls + p.graph_launched >
			                                      best->launch_calls + best->graph_launched))
				*best = p;
		}
		cg_rfile_free(&f);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* Milliseconds above 1 ms, else microseconds. */
static const char *cg_time(char *buf, size_t len, double us)
{
	if (us >= 1000)
		snprintf(buf, len, "%.2f ms", us / 1000);
	else
		snprintf(buf, len, "%.1f us", us);
	return buf;
}

/* The GPU busy time, the GPU's idle time inside launch calls and the two bounds shim/observers/floor.c
 * computed from them (what each means and rests on is said there), per `per`. */
static void cg_profile_floor(const struct cg_profile *p, double per)
{
	char a[32], b[32];
	double w = p->wall_us / per, h = p->launch_host_us / per, busy = p->gpu_busy_us / per;
	const char *unit = p->iterations_found ? "per iteration" :
	                   p->later_half ? "over the later half" : "over the run";
	char bound[48] = "none (the launch calls take the whole wall time)", gap[64] = "unknown";
	if (p->busy_bound > 0)
		snprintf(bound, sizeof bound, "at most %.2fx", p->busy_bound);
	if (p->launch_gap_bound > 0)
		snprintf(gap, sizeof gap, "at most %.2fx", p->launch_gap_bound);
	if (p->gpu_busy_us < 0) {
		printf("  GPU busy                   unavailable (%s)\n", p->why);
		printf("  the floor                  busy bound %s%s · launch-gap bound unknown "
		       "(GPU busy time unknown)\n", bound, p->busy_bound > 0 ? " if the GPU keeps up" : "");
		return;
	}
	printf("  GPU busy                   %s %s, %.0f%% of the wall time\n",
	       cg_time(a, sizeof a, busy), unit, w > 0 ? 100 * busy / w : 0);
	if (p->gpu_idle_in_launch_us >= 0)
		printf("  GPU idle in launch calls   %s %s, of %s in launch calls\n",
		       cg_time(a, sizeof a, p->gpu_idle_in_launch_us / per), unit,
		       cg_time(b, sizeof b, h));
	else
		printf("  GPU idle in launch calls   unknown (the run outlived the record of its launch calls)\n");
	bool untraced = p->idle_untraced_us >= 0;
	if (untraced) {
		/* Paused, a median can come out above the one traced (noise where the records add
		 * nothing): nothing added, as the shim counts it (floor.c). */
		double added = p->call_traced_us > p->call_untraced_us ?
		               p->call_traced_us - p->call_untraced_us : 0;
		printf("  tracing                    CUPTI's kernel records added %.2f us to each launch "
		       "call (%.2f us paused, %.2f on: medians of the program's, early in the run); "
		       "without them, GPU idle in launch calls %s %s (CUPTI attached costs more: "
		       "left in)\n",
		       added, p->call_untraced_us,
		       p->call_traced_us, cg_time(a, sizeof a, p->idle_untraced_us / per), unit);
		if (p->launch_gap_traced > 0)
			snprintf(gap + strlen(gap), sizeof gap - strlen(gap), " (as traced: %.2fx)",
			         p->launch_gap_traced);
	} else if (p->gpu_idle_in_launch_us >= 0) {
		printf("  tracing                    what CUPTI's kernel records added to each launch call "
		       "is unknown (%s): the figures and bounds include it\n", p->tracing_why);
	}
	printf("  the floor                  busy bound %s%s · launch-gap bound %s%s\n", bound,
	       p->busy_bound <= 0 ? "" : p->bound_by_gpu ? " (GPU-bound)" : " (host-bound)", gap,
	       untraced ? ", both without the kernel records' cost" : "");
}

/* The program's waits (syncs, copies to or from the host) per `per`, and what one took over
 * the run: set beside what a wait takes under cugraft (`cugraft report`), the difference is what
 * deferring exposed to the waiting host. */
static void cg_profile_waits(const struct cg_profile *p, double per, const char *unit)
{
	char a[32];
	if (p->wait_calls <= 0 || p->wait_us < 0)
		return;
	printf("  waits                      %.1f %s (syncs, copies to or from the host), %s each "
	       "over the run\n", p->waits / per, unit, cg_time(a, sizeof a, p->wait_us / p->wait_calls));
}

/* " (N in M launches of the program's own graphs)", per `per`, where it launched graphs of its
 * own: those launches are graphed already, and their host cost is no launch call's. */
static void cg_profile_graphs(char *buf, size_t len, const struct cg_profile *p, double per,
                              const char *fmt)
{
	buf[0] = 0;
	if (p->graph_launches <= 0)
		return;
	char n[32], m[32];
	snprintf(n, sizeof n, fmt, p->graph_launched / per);
	snprintf(m, sizeof m, fmt, p->graph_launches / per);
	snprintf(buf, len, " (%s in %s launches of the program's own graphs)", n, m);
}

static void cg_profile_print(const struct cg_merged *m, const struct cg_profile *p, size_t worked)
{
	printf("cugraft profile (record-only: nothing was deferred or graphed)\n");
	if (m->processes == 0 || m->partial == m->processes) {
		printf("  no summary was written: the program did not use CUDA, or did not exit normally\n");
		return;
	}
	double launches = cg_merged_total(m, "launches", 0), ops = cg_merged_total(m, "ops", 0);
	printf("  processes with CUDA work   %zu%s", worked,
	       worked > 1 ? " (per-iteration figures: the one that launched most)" : "");
	if (m->processes > worked)
		printf(" (and %zu that reached the driver and did no work)", m->processes - worked);
	printf("\n");
	printf("  ops / launches             %.0f / %.0f\n", ops, launches);
	double per_iter = 0;
	if (p->found && p->iterations_found) {
		double n = p->iterations;
		per_iter = p->launch_calls / n;
		char a[32], b[32], g[160];
		cg_profile_graphs(g, sizeof g, p, n, "%.1f");
		printf("  iteration                  %.0f launches and %.0f boundaries, the period of the "
		       "program's launches and boundaries; the last %.0f iterations measured\n",
		       (p->launch_calls + p->graph_launched) / n, p->boundaries, n);
		printf("  per iteration              %s wall · %.1f launches%s · %.1f syncs · %s in launch calls\n",
		       cg_time(a, sizeof a, p->wall_us / n), (p->launch_calls + p->graph_launched) / n,
		       g, p->syncs / n, cg_time(b, sizeof b, p->launch_host_us / n));
		cg_profile_waits(p, n, "per iteration");
		cg_profile_floor(p, n);
	} else if (p->found) {
		char a[32], b[32], g[160];
		cg_profile_graphs(g, sizeof g, p, 1, "%.0f");
		printf("  iterations                 none found (no repeating sequence of launches and "
		       "boundaries); "
		       "figures over the %s\n", p->later_half ?
		       "later half of the run's launch calls (start-up left out)" : "run");
		char syncs[48] = "";
		if (p->later_half)  /* (the run's are not counted) */
			snprintf(syncs, sizeof syncs, " · %.0f syncs", p->syncs);
		printf("  %-26s %s wall · %.0f launches%s%s · %s in launch calls\n",
		       p->later_half ? "over the later half" : "over the run",
		       cg_time(a, sizeof a, p->wall_us), p->launch_calls + p->graph_launched, g, syncs,
		       cg_time(b, sizeof b, p->launch_host_us));
		cg_profile_waits(p, 1, p->later_half ? "over the later half" : "over the run");
		cg_profile_floor(p, 1);
	} else {
		printf("  iterations                 unknown (the summary has no profile)\n");
	}
	double replayable = cg_merged_total(m, "ops_replayable", -1);
	if (replayable >= 0 && ops > 0) {
		double share = replayable / ops;
		printf("  learnable share            %.1f%% of ops repeat (ops_replayable / ops)\n", 100 * share);
		printf("  rough verdict              %s\n",
		       share < 0.5 ? "little repeats: graphs will help little" :
		       per_iter >= 100 ? "many launches per iteration that repeat: graphs are likely to help" :
		       "the work repeats but iterations launch little: expect a small gain");
	}
}

int cg_cmd_profile(int argc, char **argv)
{
	int i = 1;
	if (i < argc && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
		printf("usage: cugraft profile -- CMD ARGS...\n"
		       "Runs CMD with CUGRAFT_RECORD_ONLY=1 CUGRAFT_PROFILE=1 and prints, per iteration,\n"
		       "the wall time, GPU busy time, host time in launch calls and the GPU's idle time\n"
		       "inside them, launches and syncs, and two bounds on what cugraft can gain: the\n"
		       "busy bound (no shorter than the GPU busy time, nor than the wall time less the\n"
		       "launch calls) and the launch-gap bound (only the GPU's idle time inside launch\n"
		       "calls goes).\n");
		return 0;
	}
	if (i < argc && strcmp(argv[i], "--") == 0)
		i++;
	else if (i < argc && argv[i][0] == '-') {
		fprintf(stderr, "cugraft profile: unknown option %s\nusage: cugraft profile -- CMD ARGS...\n",
		        argv[i]);
		return 2;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: cugraft profile -- CMD ARGS...\n");
		return 2;
	}
	char *lib = cg_tool_library();
	if (lib == NULL)   /* (it said where it looked) */
		return 1;
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
		{ "CUGRAFT_DISABLE", "0" },   /* the profile needs the library on */
		{ "CUGRAFT_RECORD_ONLY", "1" },
		{ "CUGRAFT_PROFILE", "1" },
		{ "CUGRAFT_REPORT", pattern },
	};
	int status = cg_spawn(argv + i, env, sizeof env / sizeof env[0], NULL);
	struct cg_merged m = { 0 };
	struct cg_profile best = { 0 };
	size_t worked = 0;
	cg_profile_collect(dir, &m, &best, &worked);
	/* a command that could not be run (cg_spawn said why) has nothing to profile */
	if (!(worked == 0 && (status == 126 || status == 127)))
		cg_profile_print(&m, &best, worked);
	cg_merged_free(&m);
	return status;
}
