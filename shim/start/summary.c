/* The report's header line, the exit summary, and the record a fatal signal leaves (summary.h).
 * Everything here runs once, off the hot path. */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "shim/observers/audit.h"
#include "checks.h"
#include "shim/loader/counts.h"
#include "shim/backend/cuda_backend.h"
#include "shim/loader/driver.h"
#include "shim/backend/events.h"
#include "shim/observers/floor.h"
#include "shim/observers/hooktime.h"
#include "shim/base/json.h"
#include "shim/backend/layout.h"
#include "shim/entry/nccl_hooks.h"
#include "shim/base/options.h"
#include "shim/base/report.h"
#include "shim/base/shim.h"
#include "shim/base/sig.h"
#include "shim/streams/registry.h"
#include "summary.h"
#include "shim/loader/trampoline.h"
#include "policy/control.h"

/* Measured on an H200 (CUDA 13.0): cuGraphExecKernelNodeSetParams 0.43 us of host time (a
 * launch's and a graph launch's are the engine's config defaults, which the cost gate uses). */
#define HOST_US_PER_PATCH 0.43

void cg_summary_header(void)
{
	if (!cg_report_active())
		return;
	struct cg_json *j = cg_json_take();
	cg_json_begin(j, "header");
	cg_json_str(j, "version", CG_VERSION);
	cg_json_int(j, "rank", cg_report_rank());
	cg_options_json(j);
	int v = 0;
	cg_tls.internal++;
	if (cg_real[CG_E_cuDriverGetVersion] && CG_REAL(cuDriverGetVersion)(&v) == CUDA_SUCCESS)
		cg_json_int(j, "driver_version", v);
	cg_json_int(j, "cuda_version", CUDA_VERSION);
	char name[256] = "";
	CUdevice dev;
	if (cg_real[CG_E_cuDeviceGet] && CG_REAL(cuDeviceGet)(&dev, 0) == CUDA_SUCCESS)
		CG_REAL(cuDeviceGetName)(name, sizeof(name), dev);
	cg_tls.internal--;
	cg_json_str(j, "device", name[0] ? name : NULL);
	int nccl = 0;
#ifdef CG_HAVE_NCCL
	nccl = cg_nccl_version();
#endif
	if (nccl)
		cg_json_int(j, "nccl_version", nccl);
	else
		cg_json_null(j, "nccl_version");
	cg_startup_checks_json(j);
	if (cg_json_end(j))
		cg_report_emit(j);
	cg_json_give(j);
}

struct stream_walk { struct cg_json *j; uint64_t ops; };

/* Where the deferral controller stands at exit: its mode and the last probe's figures. */
static void json_control(struct cg_json *j)
{
	if (!cg_shim.engine)
		return;
	struct cg_control_summary cs, *c = &cs;
	cg_engine_control(cg_shim.engine, c);
	static const char *const phases[] = { [CG_CTL_WAIT] = "waiting", [CG_CTL_PROBE] = "probing",
	                                      [CG_CTL_STAND] = "standing", [CG_CTL_TRUST] = "trusting" };
	cg_json_obj(j, "control");
	cg_json_str(j, "mode", c->defer ? "graphs" : "eager");
	cg_json_str(j, "phase", phases[c->phase]);
	cg_json_uint(j, "decisions", c->decisions);
	cg_json_uint(j, "changes", c->flips);
	if (c->decisions) {
		cg_json_double(j, "eager_ns_per_op", c->last.eager_ns);
		cg_json_double(j, "graphed_ns_per_op", c->last.graph_ns);
		cg_json_uint(j, "eager_epochs", c->last.eager_samples);
		cg_json_uint(j, "graphed_epochs", c->last.graph_samples);
	}
	if (c->trust_cut) {
		cg_json_double(j, "trust_cut_ns_per_op", c->trust_cut_ns);
		cg_json_double(j, "eager_before_graphs_ns_per_op", c->eager_ref_ns);
	}
	if (c->waste_cut)
		cg_json_bool(j, "waste_cut", true);
	cg_json_obj_end(j);
}

/* Where deferred work kept diverging (policy/engine.h), most frequent first; `at` counts from 0. */
static void json_divergence_sites(struct cg_json *j)
{
	struct cg_divergence_site site[5];
	uint32_t n = cg_shim.engine ? cg_engine_divergence_sites(cg_shim.engine, site, 5) : 0;
	cg_json_arr(j, "divergence_sites");
	for (uint32_t i = 0; i < n; i++) {
		cg_json_obj(j, NULL);
		cg_json_str(j, "expected", site[i].expected);
		cg_json_str(j, "got", site[i].got);
		cg_json_uint(j, "at", site[i].at);
		cg_json_uint(j, "ops", site[i].ops);
		cg_json_uint(j, "count", site[i].count);
		cg_json_uint(j, "first_op", site[i].first_op);
		cg_json_uint(j, "last_op", site[i].last_op);
		cg_json_obj_end(j);
	}
	cg_json_arr_end(j);
}

static void json_stream(struct cg_sstate *s, void *arg)
{
	struct stream_walk *w = arg;
	uint64_t ops = atomic_load(&s->ops);
	w->ops += ops;
	if (!ops)
		return;
	cg_json_obj(w->j, NULL);
	cg_json_uint(w->j, "id", s->id);
	cg_json_str(w->j, "kind", s->legacy ? "legacy" : s->per_thread ? "per_thread" :
	                          s->blocking ? "blocking" : "non_blocking");
	cg_json_uint(w->j, "ops", ops);
	cg_json_obj_end(w->j);
}

/* The engine's counters, with the ops the wrappers let pass it (counts.h). */
static void summary_stats(struct cg_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (cg_shim.engine)
		cg_engine_stats(cg_shim.engine, st);
	/* Launches into the program's own capture run nowhere then (its graph launches run them):
	 * counted apart, not as ops run eagerly. */
	for (int r = 0; r < CG_R_COUNT; r++) {
		uint64_t n = cg_count_total(CG_COUNT_BYPASS + r);
		if (r == CG_R_CAPTURE)
			continue;
		st->ops += n;
		st->ops_eager += n;
		st->fallbacks[r] += n;
	}
}

/* What ran and what it cost: launches, the engine's counters and their ratios
 * (policy/stats.def), the flusher, the graphs' memory, the host time saved. */
static void json_work(struct cg_json *j, const struct cg_stats *st)
{
	uint64_t launches = 0;
	for (int e = 0; e < CG_E_COUNT; e++)
		if (strncmp(cg_entry_name[e], "cuLaunchKernel", 14) == 0)
			launches += cg_count_entry((enum cg_entry)e);
	cg_json_uint(j, "launches", launches);
	cg_json_uint(j, "ops_in_program_captures", cg_count_total(CG_COUNT_BYPASS + CG_R_CAPTURE));
#define CG_STAT(field, key, doc) if (key) cg_json_uint(j, key, st->field);
#define CG_STAT_RATIO(key, num, den) \
	cg_json_double(j, key, st->den ? (double)st->num / (double)st->den : 0.0);
#include "policy/stats.def"
#undef CG_STAT
#undef CG_STAT_RATIO
	/* a flusher that keeps waking while the program is idle costs a core for nothing */
	cg_json_uint(j, "flusher_wakeups", atomic_load(&cg_shim.flusher_wakeups));
	/* what the graphs take of the device's memory (cuMemGetInfo does not say it is theirs) */
	uint64_t mem_now, mem_peak;
	cg_backend_graph_memory(&mem_now, &mem_peak);
	cg_json_uint(j, "graph_memory_bytes", mem_now);
	cg_json_uint(j, "graph_memory_peak_bytes", mem_peak);
	/* graphs on shared executables: what instantiations they spared, what their switches did */
	struct cg_backend_execs ex;
	cg_backend_execs(&ex);
	cg_json_uint(j, "executables", ex.made);
	cg_json_uint(j, "graphs_sharing", ex.joined);
	cg_json_uint(j, "executable_switches", ex.switches);
	cg_json_uint(j, "executables_bought", ex.bought);
	struct cg_engine_config costs;
	cg_engine_config_default(&costs);
	double saved = cg_engine_launch_saved_us(&costs, (double)st->ops_replayed,
	                                         (double)st->graph_launches) -
	               (double)st->patches * HOST_US_PER_PATCH;
	cg_json_double(j, "host_time_saved_us", saved > 0 ? saved : 0.0);
	/* what the savings first cost (the program's launch calls that built a graph waited for
	 * it), and what the replays cost the host instead of the launch calls they spared */
	struct cg_backend_host_time ht;
	cg_backend_host_time(&ht);
	cg_json_double(j, "graph_build_us", (double)ht.build_ns / 1000.0);
	cg_json_double(j, "graph_capture_us", (double)ht.capture_ns / 1000.0);
	cg_json_double(j, "patch_us", (double)ht.patch_ns / 1000.0);
	cg_json_double(j, "graph_launch_us", (double)ht.launch_ns / 1000.0);
	/* and what the deferred ops that ran eagerly after all took in the driver, wherever */
	cg_json_double(j, "flush_us", (double)ht.flush_ns / 1000.0);
	cg_json_uint(j, "flush_ops", ht.flush_ops);
	/* and what the program's launch calls took inside cugraft, everything in (sampled) */
	uint64_t hook_ns, hook_calls;
	cg_hooktime_total(&hook_ns, &hook_calls);
	cg_json_double(j, "launch_call_us", (double)hook_ns / 1000.0);
	cg_json_uint(j, "launch_call_count", hook_calls);
	/* of which the driver's time, in the calls cugraft forwarded (sampled alike) */
	cg_hooktime_forwards(&hook_ns, &hook_calls);
	cg_json_double(j, "launch_forward_us", (double)hook_ns / 1000.0);
	cg_json_uint(j, "launch_forward_count", hook_calls);
	/* and the replays' host time in them (builds, patches, graph launches: the rest of the
	 * replays ran in waits or the flusher) */
	cg_hooktime_replays(&hook_ns);
	cg_json_double(j, "launch_replay_us", (double)hook_ns / 1000.0);
	/* and the driver's time in the deferred ops they submitted eagerly (a divergence, a cost
	 * sample) */
	cg_hooktime_flushes(&hook_ns, &hook_calls);
	cg_json_double(j, "launch_flush_us", (double)hook_ns / 1000.0);
	cg_json_uint(j, "launch_flush_ops", hook_calls);
	/* and its waits, every one, the flushes they made in */
	cg_hooktime_waits(&hook_ns, &hook_calls);
	cg_json_double(j, "wait_call_us", (double)hook_ns / 1000.0);
	cg_json_uint(j, "wait_call_count", hook_calls);
	/* of which those that submitted work deferred before them */
	cg_hooktime_flushing_waits(&hook_ns, &hook_calls);
	cg_json_double(j, "wait_flush_us", (double)hook_ns / 1000.0);
	cg_json_uint(j, "wait_flush_count", hook_calls);
}

/* The ops run eagerly by reason, the boundaries by kind, the calls by entry point: those cugraft
 * wraps, the collectives, and those nobody classified. */
static void json_calls(struct cg_json *j, const struct cg_stats *st)
{
	cg_json_obj(j, "fallbacks");
	for (int r = 1; r < CG_R_COUNT; r++)
		if (st->fallbacks[r])
			cg_json_uint(j, cg_reason_name((enum cg_reason)r), st->fallbacks[r]);
	cg_json_obj_end(j);
	cg_json_obj(j, "boundaries");
	for (int r = 1; r < CG_R_COUNT; r++)
		if (cg_count_boundaries((enum cg_reason)r))
			cg_json_uint(j, cg_reason_name((enum cg_reason)r), cg_count_boundaries((enum cg_reason)r));
	cg_json_obj_end(j);
	cg_json_obj(j, "entry_points");
	for (int e = 0; e < CG_E_COUNT; e++)
		if (cg_count_entry((enum cg_entry)e))
			cg_json_uint(j, cg_entry_name[e], cg_count_entry((enum cg_entry)e));
	cg_json_obj_end(j);
#ifdef CG_HAVE_NCCL
	cg_nccl_json(j);
	int nccl = cg_nccl_version(); /* libnccl may have been loaded after the header was written */
	if (nccl)
		cg_json_int(j, "nccl_version", nccl);
#endif
	const char *dname;
	uint64_t calls;
	cg_json_obj(j, "unclassified_entry_points");
	for (unsigned i = 0; cg_deny_stat(i, &dname, &calls); i++)
		if (calls)
			cg_json_uint(j, dname, calls);
	cg_json_obj_end(j);
}

void cg_summary_write(void)
{
	struct cg_stats st;
	summary_stats(&st);
	static struct cg_json j; /* exit path: keep 16 KiB off a possibly small thread stack */
	cg_json_begin(&j, "summary");
	json_work(&j, &st);
	json_calls(&j, &st);
	cg_events_json_devices(&j);
	json_control(&j);
	struct stream_walk w = { &j, 0 };
	cg_json_arr(&j, "streams");
	cg_stream_each(json_stream, &w);
	cg_json_arr_end(&j);
	cg_layout_json_top(&j, "kernels", 20);
	json_divergence_sites(&j);
	cg_audit_json(&j);
	cg_floor_json(&j);
	cg_report_finish(&j);
}

/* --- a fatal signal: the program ends before exit work, so one last record says how ---------- */
static const int fatal_signals[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTERM };
static pid_t fatal_owner;

/* Async-signal-safe: a record formatted in a static buffer (no allocation, no lock), one
 * write(2), then the signal again with its default action. Once only: a handler the program
 * installed later may call this one as its predecessor (a crash reporter's chaining), and
 * would be called again by the re-raise if the signal kept a handler, forever. So the default
 * action is restored and the signal unblocked before it is raised: the process ends here, with
 * the status it would have without cugraft. */
static void on_fatal(int sig)
{
	static struct cg_json j;
	static atomic_flag written = ATOMIC_FLAG_INIT;
	if (getpid() == fatal_owner && !atomic_flag_test_and_set(&written)) { /* not a fork()ed child */
		cg_json_begin(&j, "signal");
		cg_json_int(&j, "signal", sig);
		cg_json_str(&j, "name", sigabbrev_np(sig));
		/* Deferred work still pending never ran: like launches still queued eagerly, it
		 * dies with the process. */
		cg_json_bool(&j, "work_pending", cg_any_pending());
		size_t len;
		const char *line = cg_json_end(&j) ? cg_json_line(&j, &len) : NULL;
		if (line)
			cg_report_write_unlocked(line, len);
	}
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	sigset_t only;
	sigemptyset(&only);
	sigaddset(&only, sig);
	sigprocmask(SIG_UNBLOCK, &only, NULL);
	raise(sig);
}

void cg_summary_catch_fatal(void)
{
	if (!cg_report_active())
		return;
	fatal_owner = getpid();
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
		struct sigaction old, sa = { .sa_handler = on_fatal, .sa_flags = SA_RESETHAND };
		/* The program's own handlers (set before, or later) take precedence over ours. */
		if (sigaction(fatal_signals[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL ||
		    (old.sa_flags & SA_SIGINFO))
			continue;
		sigemptyset(&sa.sa_mask);
		sigaction(fatal_signals[i], &sa, NULL);
	}
}
