/* Start-up, the background flusher, fork and exit. Nothing happens in a process until it first
 * reaches the driver (driver.c runs cg_shim_start, registered below with CG_DRIVER_ON_LOAD), so
 * processes that never use CUDA — compiler workers, data-loader workers that inherit
 * LD_PRELOAD — print and write nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "shim/observers/audit.h"
#include "shim/backend/cuda_backend.h"
#include "checks.h"
#include "shim/loader/driver.h"
#include "shim/backend/events.h"
#include "shim/observers/floor.h"
#include "init.h"
#include "shim/base/log.h"
#include "shim/backend/nvtx.h"
#include "shim/base/options.h"
#include "shim/base/report.h"
#include "shim/base/shim.h"
#include "shim/streams/registry.h"
#include "summary.h"
#include "shim/backend/timing.h"

/* --- the background flusher: deferred work never waits longer than CUGRAFT_MAX_DEFER_US ---- */
/* It sleeps until the oldest deferred work reaches that age (absolute CLOCK_MONOTONIC times, so
 * any bound the option allows works), watches through one more bound of quiet (a program's next
 * deferral then needs no wake-up call), and then sleeps until work is deferred again: a stream
 * that becomes pending wakes it (cg_shim.wake_flusher). Only GPU timing samples still in flight
 * keep it polling while idle, less and less often. */
#define QUIET_POLLS 4
#define TIMING_POLL_MAX_NS 100000000ull

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond; /* on CLOCK_MONOTONIC: set up by start_flusher */

static struct timespec timespec_of(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000ull),
	                          .tv_nsec = (long)(ns % 1000000000ull) };
}

static void sleep_until(uint64_t ns)
{
	struct timespec t = timespec_of(ns);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
		;
}

/* Nothing is deferred: sleep until something is, or until `until` (0: no limit). */
static void idle_wait(uint64_t until)
{
	pthread_mutex_lock(&idle_lock);
	atomic_store(&cg_shim.flusher_idle, true);
	if (!cg_any_pending()) {
		struct timespec t = timespec_of(until);
		if (until)
			pthread_cond_timedwait(&idle_cond, &idle_lock, &t);
		else
			pthread_cond_wait(&idle_cond, &idle_lock);
	}
	atomic_store(&cg_shim.flusher_idle, false);
	pthread_mutex_unlock(&idle_lock);
}

static void *flusher(void *arg)
{
	prctl(PR_SET_NAME, "cugraft-flush");
	prctl(PR_SET_TIMERSLACK, 1000UL); /* the default 50 us slack would double our budget */
	const uint64_t max_ns = (uint64_t)cg_shim.max_defer_us * 1000;
	/* how soon to look again at work past its age that is still deferred (its context could
	 * not be made current here), and between quiet polls */
	const uint64_t retry_ns = max_ns / 4 > 5000 ? max_ns / 4 : 5000;
	uint64_t timing_ns = retry_ns;
	unsigned quiet = 0;
	while (!atomic_load(&cg_shim.exiting)) {
		atomic_fetch_add_explicit(&cg_shim.flusher_wakeups, 1, memory_order_relaxed);
		cg_stream_read_timing();
		cg_stream_reap();
		uint64_t now = cg_engine_now(cg_shim.engine); /* the clock of pending_since */
		uint64_t next = cg_flush_older_than(now, max_ns, retry_ns);
		if (next) {
			quiet = 0;
			timing_ns = retry_ns;
			sleep_until(next);
		} else if (quiet < QUIET_POLLS) {
			quiet++;
			sleep_until(now + retry_ns);
		} else if (cg_timing_due()) {
			idle_wait(now + timing_ns);
			timing_ns = timing_ns < TIMING_POLL_MAX_NS / 2 ? timing_ns * 2 : TIMING_POLL_MAX_NS;
		} else {
			idle_wait(0);
		}
	}
	return NULL;
}

static void wake_flusher(void)
{
	pthread_mutex_lock(&idle_lock);
	pthread_cond_signal(&idle_cond);
	pthread_mutex_unlock(&idle_lock);
}

static void start_flusher(void)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals go to its own threads */
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&idle_cond, &ca);
	pthread_condattr_destroy(&ca);
	cg_shim.wake_flusher = wake_flusher;
	if (pthread_create(&t, &attr, flusher, NULL) != 0)
		cg_log(CG_LOG_WARN, "cannot start the flusher thread: deferral is off");
	else
		cg_shim.flusher_running = true;
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* A child of fork() cannot use the parent's CUDA state, and another thread may have held one
 * of our locks at the fork: the child's shim becomes a pure pass-through, and its exit neither
 * submits the parent's deferred work nor destroys the parent's graphs nor writes a summary
 * into the parent's report (the copies it inherited are not its own). A parent that never
 * reached the driver leaves its child free to start its own shim. */
static bool forked_child;

static void fork_child(void)
{
	if (!cg_driver_after_fork())
		return;
	forked_child = true;
	cg_shim_disable();
	atomic_store(&cg_shim.exiting, true);
	atomic_store(&cg_shim.driver_gone, true);
}

/* CUGRAFT_DISABLE is read before anything else so that a disabled shim never even loads the
 * driver itself; the full option table (with its warnings) is parsed at start-up. The fork
 * handler is in place before any thread can be starting the shim (a fork then must not leave
 * the child waiting for a start-up whose thread it does not have). */
__attribute__((constructor)) static void early(void)
{
	const char *d = getenv("CUGRAFT_DISABLE");
	bool off = false;
	if (d && cg_parse_bool(d, &off) == 0 && off)
		cg_shim_disable();
	pthread_atfork(NULL, NULL, fork_child);
}

static void on_exit_handler(void)
{
	cg_shim_exit();
}

void cg_shim_start(void)
{
	cg_options_init();
	if (cg_opt_bool(CG_OPT_DISABLE)) {
		cg_shim_disable();
		return;
	}
	cg_shim.max_defer_us = (uint32_t)cg_opt_int(CG_OPT_MAX_DEFER_US);
	cg_shim.record_only = cg_opt_bool(CG_OPT_RECORD_ONLY) || cg_check_launch_blocking();

	struct cg_engine_config cfg;
	cg_engine_config_default(&cfg);
	cfg.warmup = (uint32_t)cg_opt_int(CG_OPT_WARMUP);
	cfg.chunk_max = (uint32_t)cg_opt_int(CG_OPT_CHUNK);
	cfg.max_graphs = (uint32_t)cg_opt_int(CG_OPT_MAX_GRAPHS);
	cfg.record_only = cg_shim.record_only;
	cfg.measure = cg_opt_bool(CG_OPT_MEASURE);
	cfg.defer_budget_ns = (uint64_t)cg_shim.max_defer_us * 1000;
	cg_shim.engine = cg_engine_new(&cfg, &cg_cuda_backend, NULL);
	if (!cg_shim.engine)
		cg_log(CG_LOG_WARN, "cannot create the policy engine: recording only");
	cg_nvtx_start();   /* (NVTX loads a tool's library: here, where no lock is held) */

	cg_startup_checks();
	cg_report_start();
	cg_summary_header();
	cg_summary_catch_fatal();
	if (cg_opt_bool(CG_OPT_AUDIT)) {
		cg_shim.auditing = true;  /* before CUPTI can see a forwarded call */
		atomic_fetch_or(&cg_unsettled, CG_UNSETTLED_AUDIT);
		cg_audit_start();
	}
	if (cg_opt_bool(CG_OPT_PROFILE))  /* before atexit: CUPTI's exit work runs after ours */
		cg_floor_start();
	if (cg_shim.engine && !cg_shim.record_only)
		start_flusher();
	atexit(on_exit_handler);
	cg_log(CG_LOG_INFO, "active (warmup %u, chunk %u, max defer %u us%s)", cfg.warmup,
	       cfg.chunk_max, cg_shim.max_defer_us, cfg.record_only ? ", recording only" : "");
}

CG_DRIVER_ON_LOAD(cg_shim_start);

void cg_shim_exit(void)
{
	static atomic_flag once = ATOMIC_FLAG_INIT;
	if (atomic_flag_test_and_set(&once) || forked_child)
		return;
	atomic_store(&cg_shim.exiting, true);
	/* Pending work is submitted and graphs of live contexts destroyed; a stream whose lock
	 * another thread still holds (exit() from a second thread mid-launch) is left alone. */
	cg_stream_exit_all();
	cg_summary_write();
	atomic_store(&cg_shim.driver_gone, true);
}
