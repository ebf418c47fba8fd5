/* `cugraft report FILE... [--json]`: renders reports as a summary a person reads in 30 s: per
 * process (rank; processes that shared a report path are told apart in their file) the device
 * and non-default options, the share replayed from graphs, the host time saved, the fallback
 * reasons by count with the first occurrence of each (api, kernel, stream, backtrace, hint), the
 * collectives votes that did not agree; then the merged totals and whether every rank fell back
 * at the same votes. Bad lines are named (file:line) and skipped; a file that is no report
 * (a directory, empty, without records, a line beyond the limit) is named and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cugraft.h"
#include "reportfile.h"
#include "srcline.h"
#include "shim/base/options.h"

/* 13000 -> "13.0"; strings as they are. */
static void cg_print_version(const char *label, const struct jv *v)
{
	if (v == NULL)
		return;
	if (v->type == JV_NUM && v->num >= 1000 && v->num < 1e9)   /* (int) of more is undefined */
		printf(" %s %d.%d", label, (int)v->num / 1000, ((int)v->num % 1000) / 10);
	else if (v->type == JV_STR)
		printf(" %s %s", label, v->str);
	else if (v->type == JV_NUM)
		printf(" %s %.0f", label, v->num);
	else if (v->type == JV_NULL)
		printf(" %s none", label);
}

/* The option's value in the header, as the table writes defaults ("1", "64", "warn"). */
static void cg_option_text(const struct jv *v, char *buf, size_t size)
{
	if (v->type == JV_BOOL)
		snprintf(buf, size, "%d", v->b);
	else if (v->type == JV_NUM)
		snprintf(buf, size, "%.0f", v->num);
	else if (v->type == JV_STR)
		snprintf(buf, size, "%s", v->str);
	else
		snprintf(buf, size, "?");
}

/* "== PATH (rank R, pid P)"; "PATH, process K of N" when processes shared the file. */
static void cg_print_header(const struct cg_rproc *f, size_t index, size_t k, size_t n)
{
	const struct jv *h = f->header;
	double rank = jv_num(jv_get(h, "rank"), (double)index);
	printf("== %s", f->path);
	if (n > 1)
		printf(", process %zu of %zu", k + 1, n);
	printf(" (rank %.0f", rank);
	if (f->pid >= 0)
		printf(", pid %.0f", f->pid);
	printf(")\n");
	if (h == NULL) {
		printf("  (no header record)\n");
		return;
	}
	/* The summary names the devices the program's streams used; the header (written before
	 * the program picks one) names device 0 at best. */
	const struct jv *dev = jv_get(h, "device"), *used = jv_get(f->summary, "devices");
	printf("  device     ");
	if (used && used->type == JV_ARR && used->n > 0) {
		for (size_t i = 0; i < used->n; i++) {
			const char *name = jv_str(jv_get(used->items[i], "name"));
			printf("%s%s (GPU %.0f)", i ? ", " : "", name ? name : "?",
			       jv_num(jv_get(used->items[i], "ordinal"), 0));
		}
	} else if (jv_str(dev))
		printf("%s", jv_str(dev));
	else if (dev)
		jv_print(stdout, dev);
	else
		printf("?");
	cg_print_version("· driver", jv_get(h, "driver_version"));
	cg_print_version("· CUDA", jv_get(h, "cuda_version"));
	const struct jv *nccl = jv_get(f->summary, "nccl_version"); /* loaded after the header? */
	if (nccl == NULL)
		nccl = jv_get(h, "nccl_version");
	if (nccl && nccl->type == JV_NUM && nccl->num >= 10000 && nccl->num < 1e9) /* NCCL_VERSION_CODE since 2.9 */
		printf(" · NCCL %d.%d.%d", (int)nccl->num / 10000, (int)nccl->num % 10000 / 100,
		       (int)nccl->num % 100);
	else
		cg_print_version("· NCCL", nccl);
	printf("\n  options    ");
	const struct jv *opts = jv_get(h, "options");
	int shown = 0;
	for (int o = 0; o < CG_OPT_COUNT; o++) {
		const struct cg_opt_info *in = cg_opt_info((enum cg_opt)o);
		const struct jv *v = jv_get(opts, in->name);
		char text[256];
		if (v == NULL)
			continue;
		cg_option_text(v, text, sizeof text);
		if (strcmp(text, in->def) != 0)
			printf("%s%s=%s", shown++ ? " " : "", in->name, text);
	}
	printf("%s\n", shown ? "" : "all defaults");
}

static void cg_print_counts(const char *label, const struct cg_counts *c)
{
	printf("  %-10s", label);
	if (c == NULL || c->n == 0) {
		printf(" none\n");
		return;
	}
	for (size_t i = 0; i < c->n; i++)
		printf("%s%s %.0f", i ? " · " : " ", c->names[i], c->counts[i]);
	printf("\n");
}

/* A process killed by a signal wrote no summary, but a "signal" record (shim/start/summary.c). */
static void cg_print_ending(const struct cg_rproc *f)
{
	for (size_t i = 0; i < f->n_others; i++) {
		const char *event = jv_str(jv_get(f->others[i], "event"));
		if (event == NULL || strcmp(event, "signal") != 0)
			continue;
		const char *name = jv_str(jv_get(f->others[i], "name"));
		const struct jv *pending = jv_get(f->others[i], "work_pending");
		printf("  ended      by signal %.0f (SIG%s)%s\n", jv_num(jv_get(f->others[i], "signal"), 0),
		       name ? name : "?", pending && pending->type == JV_BOOL && pending->b ?
		       ", with deferred work not yet submitted (it died with the process)" : "");
	}
}

/* The collectives scope (shim/entry/VOTE.md): collectives launched from graphs and the votes held. */
/* The deferral controller (the summary's control): whether this process defers, and the
 * figures of the measurement that decided it. */
static void cg_print_control(const struct cg_rproc *f)
{
	const struct jv *c = f->summary ? jv_get(f->summary, "control") : NULL;
	if (!c || c->type != JV_OBJ)
		return;
	const char *mode = jv_str(jv_get(c, "mode"));
	double decisions = jv_num(jv_get(c, "decisions"), 0);
	printf("  deferral   %s", mode ? mode : "?");
	if (decisions < 1) {
		const char *phase = jv_str(jv_get(c, "phase"));
		printf(" (not measured: %s)\n",
		       !phase ? "?" :
		       strcmp(phase, "waiting") == 0 ? "no epoch with graphs in use yet, or CUGRAFT_MEASURE=0" :
		       strcmp(phase, "trusting") == 0 ? "graphs save much launch time; first probe not due yet" :
		       "probe still running");
	} else {
		double e = jv_num(jv_get(c, "eager_ns_per_op"), 0);
		double g = jv_num(jv_get(c, "graphed_ns_per_op"), 0);
		printf(" · measured %.0f ns per op graphed vs %.0f eager (%.3fx) over %.0f+%.0f epochs · "
		       "%.0f decisions, %.0f changed\n", g, e, g > 0 ? e / g : 0,
		       jv_num(jv_get(c, "graphed_epochs"), 0), jv_num(jv_get(c, "eager_epochs"), 0),
		       decisions, jv_num(jv_get(c, "changes"), 0));
	}
	const struct jv *cut = jv_get(c, "trust_cut_ns_per_op");
	if (cut)
		printf("             first probe early: graphed epochs at %.0f ns per op, clearly over "
		       "%.0f eager before the graphs\n", jv_num(cut, 0),
		       jv_num(jv_get(c, "eager_before_graphs_ns_per_op"), 0));
}

static void cg_print_collectives(const struct cg_merged *m)
{
	const struct cg_counts *v = cg_merged_map(m, "votes");
	if (v == NULL || v->n == 0)
		return;
	const struct cg_counts *cg = cg_merged_map(m, "collective_graphs");
	double seen = 0;
	for (size_t i = 0; cg && i < cg->n; i++)
		if (strcmp(cg->names[i], "seen") == 0)
			seen = cg->counts[i];
	printf("  collectives %.0f of %.0f in the scope launched from graphs\n",
	       cg_merged_total(m, "collectives_graphed", 0), seen);
	cg_print_counts("votes", v);
}

/* A rank's vote value (shim/entry/VOTE.md): 0 eager, 1 capture, 2 + epoch replay. */
static void cg_print_vote_value(double v)
{
	if (v <= 0)
		printf("eager");
	else if (v < 2)
		printf("capture");
	else
		printf("replay of the graph captured at vote %.0f", v - 2);
}

static bool cg_is_vote(const struct jv *e)
{
	const char *event = jv_str(jv_get(e, "event"));
	return event && strcmp(event, "vote") == 0;
}

/* Collectives-scope votes that did not agree, or failed, on this rank (the shim records the
 * first 8 of each reason); every rank sees the same result, so each rank's report lists them. */
static void cg_print_votes(const struct cg_rproc *f)
{
	bool hinted = false;
	for (size_t i = 0; i < f->n_others; i++) {
		const struct jv *e = f->others[i];
		if (!cg_is_vote(e))
			continue;
		const char *api = jv_str(jv_get(e, "api")), *outcome = jv_str(jv_get(e, "outcome"));
		const char *hint = jv_str(jv_get(e, "hint"));
		printf("  vote %.0f on communicator %.0f (%s): %s; this rank wanted ", jv_num(jv_get(e, "vote"), 0),
		       jv_num(jv_get(e, "comm"), 0), api ? api : "?", outcome ? outcome : "?");
		cg_print_vote_value(jv_num(jv_get(e, "local"), 0));
		if (outcome && strcmp(outcome, "declined") == 0) {
			printf(", the ranks ranged from ");
			cg_print_vote_value(jv_num(jv_get(e, "min"), 0));
			printf(" to ");
			cg_print_vote_value(jv_num(jv_get(e, "max"), 0));
		}
		printf("\n");
		if (hint && hint[0] && !hinted)
			printf("      hint: %s\n", hint);
		hinted = hinted || (hint && hint[0]);
	}
}

/* The votes one file recorded as not agreed, as "comm:vote" words in file order. */
static void cg_vote_list(const struct cg_rproc *f, char *buf, size_t size)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < f->n_others && used < size; i++)
		if (cg_is_vote(f->others[i]))
			used += (size_t)snprintf(buf + used, size - used, "%s%.0f:%.0f", used ? " " : "",
			                         jv_num(jv_get(f->others[i], "comm"), 0),
			                         jv_num(jv_get(f->others[i], "vote"), 0));
}

/* Ranks must fall back together (NCCL: a collective is captured on every rank or none): the
 * files of one job should list the same votes. Says so, or names the ranks that differ. */
static void cg_print_vote_agreement(char lists[][256], const double *ranks, size_t n)
{
	bool any = false, same = true;
	for (size_t i = 0; i < n; i++) {
		any = any || lists[i][0];
		same = same && strcmp(lists[i], lists[0]) == 0;
	}
	if (!any)
		return;
	if (same) {
		printf("  ranks      consistent: every rank ran the same collectives eagerly after the votes that"
		       " did not agree (communicator:vote %s)\n", lists[0]);
		return;
	}
	printf("  ranks      INCONSISTENT: the votes that did not agree differ (communicator:vote):");
	for (size_t i = 0; i < n; i++)
		printf("%s rank %.0f: %s", i ? ";" : "", ranks[i], lists[i][0] ? lists[i] : "none");
	printf("\n      hint: files of different jobs, a rank killed early, or a vote timeout on one rank\n");
}

/* The sites where deferred work kept diverging, most frequent first (the summary keeps the top
 * five of each process). */
static void cg_print_sites(const struct cg_merged *m)
{
	struct cg_counts sorted = { 0 };
	for (size_t i = 0; i < m->sites.n; i++)
		cg_counts_add(&sorted, m->sites.names[i], m->sites.counts[i]);
	cg_counts_sort(&sorted);
	for (size_t i = 0, shown = 0; i < sorted.n && shown < 3; i++) {
		struct cg_site site;
		if (!cg_site_read(sorted.names[i], &site))
			continue;
		shown++;
		char span[80] = "";
		double first, last;
		if (cg_merged_site_span(m, sorted.names[i], &first, &last))
			snprintf(span, sizeof span, last > first ? ", from op %.0f to op %.0f" : ", at op %.0f",
			         first, last);
		printf("  keeps diverging: expected %.*s, got %s at op %u of a %u-op chunk (%.0f time%s%s)\n",
		       site.expected_len, site.expected, site.got, site.at + 1, site.ops,
		       sorted.counts[i], sorted.counts[i] == 1 ? "" : "s", span);
	}
	cg_counts_free(&sorted);
}

/* What the replays took of the host: launching the graphs and patching their nodes, each
 * with its cost per call, where the summary has them (older files do not); then the program's
 * own calls inside cugraft: its launch calls (the driver's share of them, and cugraft's own
 * work), its waits, and how many chunks repaid their graphs. */
static void cg_print_replay_cost(const struct cg_merged *m)
{
	double launch = cg_merged_total(m, "graph_launch_us", -1);
	double patch = cg_merged_total(m, "patch_us", -1);
	double launches = cg_merged_along(m, "graph_launch_us", 0);  /* (older files time none) */
	double patches = cg_merged_along(m, "patch_us", 0);
	const char *label = "  calls      ";  /* the first line's, where no graph was launched */
	if (launch >= 0 && patch >= 0 && launches > 0) {
		printf("  replay     launching the graphs took %.1f ms (%.2f us each)", launch / 1000.0,
		       launch / launches);
		if (patches > 0)
			printf(", patching %.0f nodes %.1f ms (%.2f us each)", patches, patch / 1000.0,
			       patch / patches);
		printf("\n");
		label = "             ";
	}
	/* the deferred ops that ran eagerly after all: what deferring them bought nothing for */
	double flush_ops = cg_merged_total(m, "flush_ops", 0);
	double flush_us = cg_merged_total(m, "flush_us", -1);
	if (flush_ops > 0 && flush_us >= 0) {
		printf("%s%.0f deferred ops ran eagerly after all (divergences, flushes, cost samples): "
		       "%.1f ms in the driver, %.2f us each\n", label, flush_ops, flush_us / 1000.0,
		       flush_us / flush_ops);
		label = "             ";
	}
	double calls = cg_merged_total(m, "launch_call_count", 0);
	double in_calls = cg_merged_total(m, "launch_call_us", -1);
	if (calls > 0 && in_calls >= 0) {
		printf("%sthe program's launch calls took %.1f ms inside cugraft, %.2f us each, everything in (sampled)\n",
		       label, in_calls / 1000.0, in_calls / calls);
		label = "             ";
	}
	/* the driver's share: the forwards of the calls cugraft ran eagerly, and the deferred ops
	 * they submitted eagerly (a divergence, a cost sample); the rest, less what the replays
	 * took in them, is cugraft's own work */
	double forwards = cg_merged_total(m, "launch_forward_count", 0);
	double in_forwards = cg_merged_total(m, "launch_forward_us", -1);
	double in_replays = cg_merged_total(m, "launch_replay_us", -1);
	double in_flushes = cg_merged_total(m, "launch_flush_us", 0);  /* (older files: in "own") */
	double flushed = cg_merged_total(m, "launch_flush_ops", 0);
	if (in_replays < 0 && !(launches > 0))  /* a file before launch_replay_us: none replayed */
		in_replays = 0;
	if (calls > 0 && in_calls >= 0 && forwards > 0 && in_forwards >= 0) {
		double own = in_replays >= 0 ? in_calls - in_forwards - in_replays - in_flushes : -1;
		printf("             of it the driver took %.1f ms in the %.0f%% of them forwarded (%.2f us each)",
		       in_forwards / 1000.0, 100.0 * forwards / calls, in_forwards / forwards);
		if (flushed > 0)
			printf(" and %.1f ms in %.0f deferred ops they submitted eagerly (%.2f us each, "
			       "%.2f us a call)", in_flushes / 1000.0, flushed, in_flushes / flushed,
			       in_flushes / calls);
		if (own >= 0)
			printf("; cugraft's own work about %.2f us a call", own / calls);
		printf("\n");
	}
	double waits = cg_merged_total(m, "wait_call_count", 0);
	double in_waits = cg_merged_total(m, "wait_call_us", -1);
	if (waits > 0 && in_waits >= 0) {
		printf("%sits %.0f waits (syncs, copies to or from the host) took %.1f ms, %.1f us each, the flushes they made in\n",
		       label, waits, in_waits / 1000.0, in_waits / waits);
		label = "             ";
		double flushing = cg_merged_total(m, "wait_flush_count", -1);
		double in_flushing = cg_merged_total(m, "wait_flush_us", -1);
		if (flushing > 0 && in_flushing >= 0 && waits > flushing)
			printf("%s%.0f of them submitted work deferred before them, %.1f us each; the "
			       "others %.1f us each\n", label, flushing, in_flushing / flushing,
			       (in_waits - in_flushing) / (waits - flushing));
		else if (flushing >= 0)
			printf("%s%.0f of them submitted work deferred before them\n", label, flushing);
	}
	double learned = cg_merged_along(m, "chunks_launched_8_times", 0);
	double repaid = cg_merged_total(m, "chunks_launched_8_times", -1);
	if (repaid >= 0 && learned > 0)
		printf("%s%.0f of %.0f chunks learned ran their graphs 8 times or more (about what repays a build)\n",
		       label, repaid, learned);
}

/* The share replayed, host time saved and fallback counts of one file or the merge. */
static void cg_print_totals(const struct cg_merged *m)
{
	double ops = cg_merged_total(m, "ops", -1);
	if (ops < 0 && m->mistyped != NULL) {
		printf("  replayed   unknown: the summary's \"%s\" is not a number\n", m->mistyped);
	} else if (ops < 0) {
		printf("  replayed   unknown: no summary record (the process did not exit normally?)\n");
	} else {
		double replayed = cg_merged_total(m, "ops_replayed", 0);
		printf("  replayed   %.1f%% of %.0f ops from graphs (%.0f graph launches, %.0f graphs built), %.0f eager\n",
		       ops > 0 ? 100.0 * replayed / ops : 0.0, ops, cg_merged_total(m, "graph_launches", 0),
		       cg_merged_total(m, "graphs_built", 0), cg_merged_total(m, "ops_eager", 0));
		double captured = cg_merged_total(m, "ops_in_program_captures", 0);
		if (captured > 0)
			printf("  captured   %.0f launches into the program's own graphs (not counted as ops: its graph launches run them)\n",
			       captured);
		printf("  saved      ~%.1f ms host time (estimate)",
		       cg_merged_total(m, "host_time_saved_us", 0) / 1000.0);
		double build = cg_merged_total(m, "graph_build_us", -1);
		double capture = cg_merged_total(m, "graph_capture_us", -1);
		if (build >= 0)
			printf("; building the graphs took %.1f ms", build / 1000.0);
		if (build > 0 && capture >= 0)
			printf(" (%.0f%% of it capturing their ops)", 100.0 * capture / build);
		printf("\n");
		double sharing = cg_merged_total(m, "graphs_sharing", 0);
		if (sharing > 0)
			printf("  shared     %.0f graphs ran on another chunk's executable (%.0f instantiated in all): "
			       "%.0f switches patched one whole, %.0f graphs got their own later\n",
			       sharing, cg_merged_total(m, "executables", 0),
			       cg_merged_total(m, "executable_switches", 0),
			       cg_merged_total(m, "executables_bought", 0));
		cg_print_replay_cost(m);
		double graph_mem = cg_merged_total(m, "graph_memory_peak_bytes", -1);
		if (graph_mem > 0)
			printf("  memory     the graphs held %.1f MiB of device memory at most (estimate)\n",
			       graph_mem / (1 << 20));
		double escaped = cg_merged_total(m, "escaped_launches", -1);
		if (escaped >= 0)
			printf("  escaped    %.0f launches bypassed interception (audit)\n", escaped);
		cg_print_collectives(m);
	}
	const struct cg_counts *fb = cg_merged_map(m, "fallbacks");
	struct cg_counts sorted = { 0 };
	for (size_t i = 0; fb && i < fb->n; i++)
		cg_counts_add(&sorted, fb->names[i], fb->counts[i]);
	cg_counts_sort(&sorted);
	cg_print_counts("fallbacks", &sorted);
	cg_counts_free(&sorted);
	cg_print_sites(m);
}

/* Ranks of one job load one libnccl: different versions mean files of different jobs or a
 * mixed installation. Names each value with its number of files. */
static void cg_print_versions(const struct cg_merged *m)
{
	for (size_t i = 0; i < m->version_names.n; i++) {
		const struct cg_counts *v = &m->versions[i];
		if (v->n < 2)
			continue;
		printf("  versions   INCONSISTENT %s:", m->version_names.names[i]);
		for (size_t k = 0; k < v->n; k++) {
			printf("%s ", k ? " ·" : "");
			cg_version_print(stdout, v->names[k], false);
			printf(" (%.0f file%s)", v->counts[k], v->counts[k] == 1 ? "" : "s");
		}
		printf("\n");
	}
}

/* The first fallback record of each reason, in the order they happened. */
static void cg_print_firsts(const struct cg_rproc *f)
{
	struct cg_counts seen = { 0 };
	for (size_t i = 0; i < f->n_fallbacks; i++) {
		const struct jv *e = f->fallbacks[i];
		const char *reason = jv_str(jv_get(e, "reason"));
		if (reason == NULL)
			reason = "?";
		size_t before = seen.n;
		cg_counts_add(&seen, reason, 1);
		if (seen.n == before)
			continue;
		printf("  first %s:", reason);
		if (jv_str(jv_get(e, "api")))
			printf(" %s", jv_str(jv_get(e, "api")));
		if (jv_get(e, "stream")) {
			printf(" on stream ");
			jv_print(stdout, jv_get(e, "stream"));
		}
		if (jv_get(e, "op_index"))
			printf(" at op %.0f", jv_num(jv_get(e, "op_index"), 0));
		if (jv_str(jv_get(e, "kernel")))
			printf(" (kernel %s)", jv_str(jv_get(e, "kernel")));
		printf("\n");
		const struct jv *expected = jv_get(e, "expected"), *got = jv_get(e, "got");
		if (expected && got) {
			printf("      expected ");
			jv_print(stdout, expected);
			printf("\n      got      ");
			jv_print(stdout, got);
			printf("\n");
		}
		if (jv_str(jv_get(e, "hint")) && jv_str(jv_get(e, "hint"))[0])
			printf("      hint: %s\n", jv_str(jv_get(e, "hint")));
		/* cugraft's own frames say nothing to the user: start at the intercepted entry point
		 * (the last libcugraft frame before the program's). */
		const struct jv *bt = jv_get(e, "backtrace");
		size_t first = 0;
		for (size_t k = 0; bt && bt->type == JV_ARR && k + 1 < bt->n; k++) {
			const char *next = jv_str(bt->items[k + 1]);
			if (next == NULL || strstr(next, "(libcugraft.so") == NULL)
				break;
			first = k + 1;
		}
		const struct jv *where = jv_get(e, "where");
		for (size_t k = first; bt && bt->type == JV_ARR && k < bt->n; k++) {
			if (!jv_str(bt->items[k]))
				continue;
			printf("      %s %s", k > first ? "  " : "at", jv_str(bt->items[k]));
			char line[512];
			if (where && where->type == JV_ARR && k < where->n &&
			    cg_srcline(jv_str(where->items[k]), line, sizeof(line)))
				printf("  %s", line);
			printf("\n");
		}
	}
	cg_counts_free(&seen);
}

/* Chunks the cost gate or their exposure to a wait kept eager, with the times that decided
 * (the first few: one line each). */
static void cg_print_disabled(const struct cg_rproc *f)
{
	int shown = 0;
	for (size_t i = 0; i < f->n_others && shown < 5; i++) {
		const struct jv *e = f->others[i], *t = jv_get(e, "timing_us");
		const char *event = jv_str(jv_get(e, "event")), *reason = jv_str(jv_get(e, "reason"));
		if (!t || !event || !reason || strcmp(event, "chunk_disabled") != 0)
			continue;
		printf("  kept eager (%s): a %.0f-op chunk on stream %.0f: its graph %.1f us on the GPU",
		       reason, jv_num(jv_get(e, "ops"), 0), jv_num(jv_get(e, "stream"), 0),
		       jv_num(jv_get(t, "graph"), 0));
		double eager = jv_num(jv_get(t, "eager"), 0);
		if (eager > 0)
			printf(", its ops eagerly %.1f", eager);
		printf("; saves %.1f us of launches", jv_num(jv_get(t, "launch_saved"), 0));
		if (strcmp(reason, "exposed") == 0)
			printf("; submitted over %.1f us, a wait right after it ends %.1f us later deferred",
			       jv_num(jv_get(t, "submit_span"), 0), jv_num(jv_get(t, "exposure"), 0));
		printf("\n");
		shown++;
	}
}

/* The text rendering of one process. */
static void cg_print_process(const struct cg_rproc *p, size_t index, size_t k, size_t n)
{
	struct cg_merged one = { 0 };
	cg_merged_add(&one, p);
	cg_print_header(p, index, k, n);
	cg_print_ending(p);
	cg_print_totals(&one);
	cg_print_control(p);
	cg_print_firsts(p);
	cg_print_disabled(p);
	cg_print_votes(p);
	double more = 0;
	for (size_t i = 0; i < p->n_suppressed; i++)
		more += jv_num(jv_get(p->suppressed[i], "count"), 0);
	if (more > 0)
		printf("  (%.0f further records of these kinds were suppressed; counts above include them)\n", more);
	cg_merged_free(&one);
	printf("\n");
}

/* The earlier argument that names the same file as argv[i] (a path given twice, or a link to
 * it), or NULL: its processes would be counted twice. */
static const char *cg_named_before(int argc, char **argv, int i)
{
	struct stat st, earlier;
	if (stat(argv[i], &st) != 0 || !S_ISREG(st.st_mode))
		return NULL;
	for (int j = 1; j < i && j < argc; j++)
		if (strcmp(argv[j], "--json") != 0 && stat(argv[j], &earlier) == 0 &&
		    earlier.st_dev == st.st_dev && earlier.st_ino == st.st_ino)
			return argv[j];
	return NULL;
}

int cg_cmd_report(int argc, char **argv)
{
	bool json = false;
	int n_files = 0;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("usage: cugraft report FILE... [--json]\n"
			       "Renders cugraft report files; several files (ranks), or several processes\n"
			       "that wrote to one file, are also merged.\n"
			       "--json prints the merged summary as one JSON object.\n"
			       "Exit status 1 when a line could not be read (each is named on stderr), or a\n"
			       "file is not a report: a directory, empty, or without cugraft records.\n");
			return 0;
		} else
			n_files++;
	}
	if (n_files == 0) {
		fprintf(stderr, "usage: cugraft report FILE... [--json]\n");
		return 2;
	}
	struct cg_merged all = { 0 };
	int status = 0;
	size_t index = 0;   /* processes so far, over every file */
	char (*votes)[256] = NULL;
	double *ranks = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			continue;
		const char *again = cg_named_before(argc, argv, i);
		if (again != NULL) {
			fprintf(stderr, "cugraft report: %s is %s again: read once\n", argv[i], again);
			continue;
		}
		struct cg_rfile f;
		if (!cg_rfile_load(&f, argv[i])) {
			status = 1;
			continue;
		}
		if (f.bad_lines > 0)
			status = 1;
		cg_merged_add_file(&all, &f);
		votes = realloc(votes, (index + f.n_procs) * sizeof(*votes));
		ranks = realloc(ranks, (index + f.n_procs) * sizeof(*ranks));
		if (!votes || !ranks) {
			fprintf(stderr, "cugraft report: out of memory\n");
			return 1;
		}
		for (size_t k = 0; k < f.n_procs; k++, index++) {
			cg_vote_list(&f.procs[k], votes[index], sizeof(votes[index]));
			ranks[index] = jv_num(jv_get(f.procs[k].header, "rank"), (double)index);
			if (!json)
				cg_print_process(&f.procs[k], index, k, f.n_procs);
		}
		cg_rfile_free(&f);
	}
	if (json) {
		cg_merged_json(stdout, &all);
	} else if (all.processes > 1) {
		printf("== merged: %zu processes in %zu file%s\n", all.processes, all.files,
		       all.files == 1 ? "" : "s");
		cg_print_totals(&all);
		cg_print_versions(&all);
		cg_print_vote_agreement(votes, ranks, index);
	}
	cg_merged_free(&all);
	free(votes);
	free(ranks);
	return status;
}
