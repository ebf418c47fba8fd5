/* Profile mode (floor.h): launch timing, the ring of the program's launches and boundaries and,
 * at exit, the window of whole iterations the summary's "profile" describes. Nothing here runs
 * unless CUGRAFT_PROFILE is on. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "activity.h"
#include "busy.h"
#include "floor.h"
#include "shim/base/json.h"
#include "shim/base/log.h"
#include "policy/mix.h"
#include "policy/period.h"
#include "shim/base/shim.h"

atomic_bool cg_floor_timing;

/* The last 1M events (16 MiB): a step of 600 launches and boundaries shows its period 1,700
 * times over; the window lies in the latest steps anyway. A step longer than MAX_PERIOD events
 * (after runs of one kernel are folded) is not found. */
enum { EVENTS = 1 << 20, MAX_PERIOD = 1 << 15 };

/* An event's key: what it was in the top 2 bits, what it names below. */
enum { KIND_SHIFT = 30, KEY_MASK = (1u << KIND_SHIFT) - 1 };
enum event_kind { EV_LAUNCH, EV_GRAPH, EV_BOUNDARY };

/* Written by the thread that takes the slot, read at exit: each field a relaxed atomic, so a
 * thread still launching at exit leaves at worst one stale event. */
struct events {
	_Atomic uint64_t t[EVENTS];    /* launch call start, boundary, graph launch (activity clock) */
	_Atomic uint32_t ns[EVENTS];   /* a launch call's duration; a graph launch's nodes */
	_Atomic uint32_t key[EVENTS];
};

/* A loop that never waits and never repeats has no period: its figures then come from the
 * later half of the run's launch calls, between snapshots of the counters taken every
 * SNAP_EVERY of them (start-up and model building, which launch little, left out). */
enum { SNAP_EVERY = 4096, SNAPS = 1024 };
struct snap {
	uint64_t t, calls, host_ns, graphs, in_graphs;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct events *ring;
static _Atomic uint64_t made;  /* events so far */
static struct snap *snaps;
static uint64_t nsnaps;        /* taken so far, under lock (the latest SNAPS are kept) */
static _Atomic uint64_t launch_calls, launch_ns, boundaries;
static _Atomic uint64_t graph_launches, graph_launched;  /* graph launches, their nodes */
static uint64_t started;
static cg_clock_fn now = cg_monotonic_ns;
static int64_t clock_offset;  /* the activity clock less the monotonic one, when they differ */
static bool activity;
static const char *activity_why;

/* What CUPTI's kernel records add to the program's launch calls. Tracing makes each launch call
 * longer (by 2.2-2.5 us, half the call, in a PyTorch decoding loop on an H100, against the run
 * without CUPTI), and where the GPU waited on a launch call it waited that much longer. The
 * part that pausing the kernel records takes away is measured here, on the program's own calls
 * (an empty kernel's says a tenth of theirs): three blocks of BLOCK consecutive launch calls
 * from call TRACING_FROM on, the middle one with kernel records paused: on, paused, on (drift
 * cancels; in a loop whose step is shorter than a block, each holds the same mix of kernels).
 * On the H100 that part is 0.5-0.65 us a call: CUPTI stays attached while paused, and the rest
 * of its cost stays in the figures, so the bounds stay bounds, looser by it. The window opens
 * after the third block, once the kernels launched unrecorded have run. A run of fewer launch
 * calls leaves it unknown. */
enum { TRACING_FROM = 2048, BLOCK = 256 };
static _Atomic uint32_t block_ns[3][BLOCK];  /* each slot written once, by its call */
static atomic_bool gave_up;          /* CUPTI would not pause or resume */

/* The medians of the blocks: untraced, traced; until they are known, why not; `end`: when the
 * records were last resumed, UINT64_MAX while they are paused. Under lock. */
struct tracing {
	bool known;
	uint64_t untraced_ns, traced_ns, end;
	const char *why;
};
static struct tracing tracing = { .why = "not measured: the run made too few launch calls" };

static uint64_t tracing_added(const struct tracing *t)
{
	return t->traced_ns > t->untraced_ns ? t->traced_ns - t->untraced_ns : 0;
}

static uint64_t mono(void)
{
	return cg_monotonic_ns();
}

static void record(enum event_kind kind, uint64_t what, uint64_t t, uint64_t ns)
{
	uint64_t i = atomic_fetch_add_explicit(&made, 1, memory_order_relaxed) % EVENTS;
	uint32_t key = (uint32_t)kind << KIND_SHIFT | ((uint32_t)what & KEY_MASK);
	atomic_store_explicit(&ring->t[i], t, memory_order_relaxed);
	atomic_store_explicit(&ring->ns[i], ns < UINT32_MAX ? (uint32_t)ns : UINT32_MAX,
	                      memory_order_relaxed);
	atomic_store_explicit(&ring->key[i], key, memory_order_relaxed);
}

static void snapshot(uint64_t calls)
{
	pthread_mutex_lock(&lock);
	struct snap *p = &snaps[nsnaps++ % SNAPS];
	*p = (struct snap){ .t = now(), .calls = calls,
	                    .host_ns = atomic_load_explicit(&launch_ns, memory_order_relaxed),
	                    .graphs = atomic_load_explicit(&graph_launches, memory_order_relaxed),
	                    .in_graphs = atomic_load_explicit(&graph_launched, memory_order_relaxed) };
	pthread_mutex_unlock(&lock);
}

static int by_value(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* The median of BLOCK calls' times: of block `a`'s where a == b, else of half of each,
 * alternately. */
static uint64_t median(int a, int b)
{
	uint32_t v[BLOCK];
	for (int k = 0; k < BLOCK; k++)
		v[k] = atomic_load_explicit(&block_ns[k % 2 ? b : a][k], memory_order_relaxed);
	qsort(v, BLOCK, sizeof(*v), by_value);
	return v[BLOCK / 2];
}

/* After block b's last call: pause the records, resume them, or take the medians (untraced:
 * the middle block's; traced: the other two's). */
static void block_done(uint64_t b)
{
	bool ok = b == 0 ? cg_activity_pause() : b == 1 ? cg_activity_resume() : true;
	pthread_mutex_lock(&lock);
	if (!ok) {
		atomic_store(&gave_up, true);
		tracing.why = b == 0 ? "CUPTI cannot pause its kernel records" :
		                       "CUPTI did not resume its kernel records";
	}
	tracing.end = b == 0 && ok ? UINT64_MAX : now();
	if (b == 2) {
		tracing.known = true;
		tracing.why = NULL;
		tracing.untraced_ns = median(1, 1);
		tracing.traced_ns = median(0, 2);
	}
	pthread_mutex_unlock(&lock);
}

/* The launch call of index i (from 0) took ns: kept where it falls in a block. (Another
 * thread's call of a block may still be in flight when its last one ends: it lands in its
 * slot, timed as it ran.) */
static void time_tracing(uint64_t i, uint64_t ns)
{
	if (i < TRACING_FROM || i >= TRACING_FROM + 3 * BLOCK || !activity ||
	    atomic_load_explicit(&gave_up, memory_order_relaxed))
		return;
	uint64_t k = i - TRACING_FROM;
	atomic_store_explicit(&block_ns[k / BLOCK][k % BLOCK], ns < UINT32_MAX ? (uint32_t)ns :
	                      UINT32_MAX, memory_order_relaxed);
	if (k % BLOCK == BLOCK - 1)
		block_done(k / BLOCK);
}

void cg_floor_launch(uint64_t t0, uint64_t key)
{
	uint64_t ns = cg_monotonic_ns() - t0;
	record(EV_LAUNCH, cg_fmix64(key), t0 + (uint64_t)clock_offset, ns);
	atomic_fetch_add_explicit(&launch_ns, ns, memory_order_relaxed);
	uint64_t calls = atomic_fetch_add_explicit(&launch_calls, 1, memory_order_relaxed) + 1;
	time_tracing(calls - 1, ns);
	if (calls % SNAP_EVERY == 0 && snaps)
		snapshot(calls);
}

/* The program's executable graphs and the launches each stands for: an open-addressed table
 * of exec handles (a destroyed exec's handle, when the driver gives it out again, is
 * instantiated again and takes its slot over). Full, further graphs count as no launches. */
enum { GRAPHS = 4096 };
static struct { CUgraphExec exec; uint32_t launches; } graph_table[GRAPHS];
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t graph_slot(CUgraphExec exec)  /* called with graph_lock held */
{
	size_t i = (size_t)(((uintptr_t)exec >> 4) * 0x9e3779b97f4a7c15ull % GRAPHS);
	for (size_t k = 0; k < GRAPHS; k++, i = (i + 1) % GRAPHS)
		if (graph_table[i].exec == exec || graph_table[i].exec == NULL)
			return i;
	return GRAPHS;
}

void cg_floor_graph(CUgraphExec exec, uint32_t launches)
{
	if (!atomic_load_explicit(&cg_floor_timing, memory_order_relaxed) || exec == NULL)
		return;
	pthread_mutex_lock(&graph_lock);
	size_t i = graph_slot(exec);
	if (i < GRAPHS) {
		graph_table[i].exec = exec;
		graph_table[i].launches = launches;
	}
	pthread_mutex_unlock(&graph_lock);
	static atomic_bool warned;
	if (i == GRAPHS && !atomic_exchange(&warned, true))
		cg_log(CG_LOG_WARN, "CUGRAFT_PROFILE: more than %d graphs; later ones weigh no launches",
		       GRAPHS);
}

void cg_floor_graph_launch(CUgraphExec exec)
{
	if (!atomic_load_explicit(&cg_floor_timing, memory_order_relaxed))
		return;
	pthread_mutex_lock(&graph_lock);
	size_t i = graph_slot(exec);
	uint32_t launches = i < GRAPHS && graph_table[i].exec == exec ? graph_table[i].launches : 0;
	pthread_mutex_unlock(&graph_lock);
	record(EV_GRAPH, cg_fmix64((uintptr_t)exec), now(), launches);
	atomic_fetch_add_explicit(&graph_launched, launches, memory_order_relaxed);
	atomic_fetch_add_explicit(&graph_launches, 1, memory_order_relaxed);
}

void cg_floor_start(void)
{
	ring = malloc(sizeof(*ring));
	if (!ring) {
		cg_log(CG_LOG_WARN, "CUGRAFT_PROFILE: no memory for the event sequence; profile is off");
		return;
	}
	snaps = malloc(SNAPS * sizeof(*snaps));  /* without it, no later-half window: the run */
	cg_clock_fn clock = mono;
	activity = cg_activity_start(mono, &clock, &activity_why);
	now = clock;
	if (now != mono)  /* launch calls are timed on the monotonic clock: moved onto CUPTI's */
		clock_offset = (int64_t)(now() - mono());
	if (!activity) {
		cg_log(CG_LOG_INFO, "CUGRAFT_PROFILE: no GPU busy time: %s", activity_why);
		tracing.why = activity_why;
	}
	started = now();
	atomic_store_explicit(&cg_floor_timing, true, memory_order_release);  /* ring, now */
	atomic_fetch_or(&cg_unsettled, CG_UNSETTLED_PROFILE);  /* every boundary is an event */
}

void cg_floor_token(enum cg_reason why)
{
	atomic_thread_fence(memory_order_acquire);  /* pairs with the store that turned timing on */
	/* How often a program polls depends on timing, not on its loop. */
	if (cg_tls.api && strstr(cg_tls.api, "Query"))
		return;
	atomic_fetch_add_explicit(&boundaries, 1, memory_order_relaxed);
	record(EV_BOUNDARY, why, now(), 0);
}

/* The ring in order at exit: n events, the oldest first. */
struct seq {
	size_t n;
	uint64_t *t;
	uint32_t *ns, *key;
};

static enum event_kind kind_of(uint32_t key)
{
	return (enum event_kind)(key >> KIND_SHIFT);
}

/* What the window holds: whole iterations when a period was found, else the later half of the
 * run's launch calls where it made enough of them, else the whole run. */
struct window {
	uint64_t t0, t1, launches, host_ns, syncs, boundaries;
	uint64_t waits;  /* syncs and copies to or from the host (hooktime.h times them) */
	uint64_t graph_launches, graph_launched;  /* the program's own graphs and their nodes */
	size_t iterations, period, disturbances;
	size_t from, to;  /* its events in the sequence (to == from: none known) */
	bool later_half;
};

/* The sums over the events [from, to) of the sequence. */
static void sum_events(struct window *w, const struct seq *s, size_t from, size_t to)
{
	w->launches = w->host_ns = w->syncs = w->boundaries = w->graph_launches = w->graph_launched = 0;
	w->waits = 0;
	for (size_t k = from; k < to; k++)
		switch (kind_of(s->key[k])) {
		case EV_LAUNCH:
			w->launches++;
			w->host_ns += s->ns[k];
			break;
		case EV_GRAPH:
			w->graph_launches++;
			w->graph_launched += s->ns[k];
			break;
		case EV_BOUNDARY:
			w->boundaries++;
			w->syncs += (s->key[k] & KEY_MASK) == CG_R_SYNC;
			w->waits += cg_reason_waits((enum cg_reason)(s->key[k] & KEY_MASK));
			break;
		}
	w->from = from;
	w->to = to;
}

/* The window of whole iterations: the period of the sequence with runs of one event folded
 * (policy/period.h), from the start of its first iteration to the start of the one after its
 * last. Where GPU intervals were overwritten (a long run), it opens later, by whole
 * iterations. */
static void find_window(struct window *w, const struct seq *s, uint64_t complete_from)
{
	size_t n = s->n;
	uint32_t *tok = malloc((n ? n : 1) * sizeof(*tok)), *wt = malloc((n ? n : 1) * sizeof(*wt));
	uint32_t *start = malloc((n + 1) * sizeof(*start));
	if (!tok || !wt || !start)
		goto done;
	for (size_t k = 0; k < n; k++) {
		tok[k] = s->key[k];
		enum event_kind kind = kind_of(s->key[k]);
		wt[k] = kind == EV_LAUNCH ? 1 : kind == EV_GRAPH ? s->ns[k] : 0;
	}
	size_t m = cg_period_runs(tok, wt, n, start);
	start[m] = (uint32_t)n;
	struct cg_period p;
	if (!cg_period_find(tok, wt, m, MAX_PERIOD, &p))
		goto done;
	size_t first = p.first, end = p.first + p.tokens, iters = p.iterations;
	if (end >= m) {  /* no event after the last iteration says when it ended: one fewer */
		end = p.last;
		iters--;
	}
	while (iters > 1 && activity && s->t[start[first]] < complete_from &&
	       first + p.period < end) {
		first += p.period;
		iters--;
	}
	if (iters == 0)
		goto done;
	sum_events(w, s, start[first], start[end]);
	w->t0 = s->t[start[first]];
	w->t1 = s->t[start[end]];
	w->iterations = iters;
	w->period = p.period;
	w->disturbances = p.disturbances;
done:
	free(tok);
	free(wt);
	free(start);
}

/* No iteration found: the window opens at the first snapshot at or past half the run's launch
 * calls (after GPU intervals and the sequence are complete) and runs to the end; its syncs and
 * launch calls' times come from the events made after it opened. Called with the lock held. */
static void later_half(struct window *w, const struct seq *s, uint64_t complete_from)
{
	uint64_t kept = nsnaps < SNAPS ? nsnaps : SNAPS;
	uint64_t oldest = s->n ? s->t[0] : UINT64_MAX;
	for (uint64_t k = nsnaps - kept; k < nsnaps; k++) {
		const struct snap *p = &snaps[k % SNAPS];
		if (2 * p->calls < w->launches || (activity && p->t < complete_from) || p->t < oldest)
			continue;
		if (p->calls == w->launches)
			return;  /* nothing after it */
		w->t0 = p->t;
		w->launches -= p->calls;
		w->host_ns -= p->host_ns;
		w->graph_launches -= p->graphs;
		w->graph_launched -= p->in_graphs;
		size_t from = 0;
		while (from < s->n && s->t[from] <= p->t)
			from++;
		struct window e;
		sum_events(&e, s, from, s->n);
		w->syncs = e.syncs;
		w->waits = e.waits;
		w->boundaries = e.boundaries;
		w->from = from;
		w->to = s->n;
		w->later_half = true;
		return;
	}
}

/* The time of the window the host spent in launch calls while the GPU had nothing to run; each
 * call taken as starting `later` ns after it did (what tracing added before its submission). */
static uint64_t idle_in_launch(const struct window *w, const struct seq *s, int dev,
                               uint64_t later)
{
	struct cg_span *host = malloc((w->to > w->from ? w->to - w->from : 1) * sizeof(*host));
	size_t nh = 0;
	if (!host)
		return 0;
	for (size_t k = w->from; k < w->to; k++)
		if (kind_of(s->key[k]) == EV_LAUNCH)
			host[nh++] = (struct cg_span){ 0, s->t[k] + (later < s->ns[k] ? later : s->ns[k]),
			                               s->t[k] + s->ns[k] };
	uint64_t idle = cg_activity_idle_in(host, nh, w->t0, w->t1, dev);
	free(host);
	return idle;
}

/* The two bounds on what a launch-side tool can gain, from the window's wall time w, launch
 * calls h, GPU busy time b and GPU idle time inside launch calls g (b, g < 0: unknown).
 * busy_bound: the step gets no shorter than its GPU busy time nor than its wall time less its
 * launch calls, min(w/b, w/(w-h)); it takes every idle gap of the GPU as removable, the host's
 * own work between syncs too. launch_gap_bound: w/(w-g), what removing the launch calls gives
 * back where the GPU waited on them: what a perfect launch-side tool reaches (it can gain more
 * only where the launch calls' removal lets later host work overlap GPU work). null: none
 * (several threads launching at once can make h exceed w). */
static void bounds_json(struct cg_json *j, double w, double h, double b, double g)
{
	double host = h < w ? w / (w - h) : 0, gpu = b > 0 ? w / b : 0;
	bool by_gpu = gpu > 0 && (host == 0 || gpu <= host);
	if (host > 0 || gpu > 0) {
		cg_json_double(j, "busy_bound", by_gpu ? gpu : host);
		cg_json_str(j, "busy_bound_by", by_gpu ? "gpu_busy" : "launch_calls");
	} else {
		cg_json_null(j, "busy_bound");
		cg_json_null(j, "busy_bound_by");
	}
	if (g >= 0 && g < w)
		cg_json_double(j, "launch_gap_bound", w / (w - g));
	else
		cg_json_null(j, "launch_gap_bound");
}

/* The ring in order, the oldest event first (NULL fields: no memory). */
static void take_sequence(struct seq *s)
{
	uint64_t all = atomic_load(&made);
	s->n = all < EVENTS ? (size_t)all : EVENTS;
	s->t = malloc((s->n ? s->n : 1) * sizeof(*s->t));
	s->ns = malloc((s->n ? s->n : 1) * sizeof(*s->ns));
	s->key = malloc((s->n ? s->n : 1) * sizeof(*s->key));
	if (!s->t || !s->ns || !s->key) {
		s->n = 0;
		return;
	}
	for (size_t k = 0; k < s->n; k++) {
		size_t i = (size_t)((all - s->n + k) % EVENTS);
		s->t[k] = atomic_load_explicit(&ring->t[i], memory_order_relaxed);
		s->ns[k] = atomic_load_explicit(&ring->ns[i], memory_order_relaxed);
		s->key[k] = atomic_load_explicit(&ring->key[i], memory_order_relaxed);
	}
}

/* The window's figures: wall time, launch calls' host time, GPU busy time and the GPU's idle
 * time inside launch calls, in us (busy, idle < 0: unknown). */
struct figures {
	double wall, host, busy, idle;
};

/* The window's GPU busy time and the GPU's idle time inside launch calls, as traced and (where
 * the tracing's cost is known) without it: f->idle, *untraced. Without records the GPU busy
 * time is unknown, not zero; so is the idle time in launch calls, where the window's launch
 * calls are not all in the sequence (the run's window of a run longer than the ring). */
static void gpu_json(struct cg_json *j, const struct window *w, const struct seq *s,
                     uint64_t records, const struct tracing *t, struct figures *f,
                     double *untraced)
{
	if (!activity || !records) {
		cg_json_null(j, "gpu_busy_us");
		cg_json_null(j, "gpu_idle_in_launch_us");
		cg_json_null(j, "gpu_idle_in_launch_untraced_us");
		cg_json_str(j, "gpu_busy_unavailable",
		            activity ? "CUPTI recorded no GPU activity" : activity_why);
		return;
	}
	int dev;
	f->busy = (double)cg_activity_busy(w->t0, w->t1, &dev) / 1e3;
	cg_json_double(j, "gpu_busy_us", f->busy);
	cg_json_int(j, "gpu_busy_device", dev);
	if (w->iterations || w->later_half || atomic_load(&made) <= EVENTS) {
		f->idle = (double)idle_in_launch(w, s, dev, 0) / 1e3;
		cg_json_double(j, "gpu_idle_in_launch_us", f->idle);
	} else {
		cg_json_null(j, "gpu_idle_in_launch_us");
	}
	if (f->idle >= 0 && t->known) {
		*untraced = (double)idle_in_launch(w, s, dev, tracing_added(t)) / 1e3;
		cg_json_double(j, "gpu_idle_in_launch_untraced_us", *untraced);
	} else {
		cg_json_null(j, "gpu_idle_in_launch_untraced_us");
	}
}

/* What tracing cost a launch call, as the blocks measured it, or why it is unknown. */
static void tracing_json(struct cg_json *j, const struct tracing *t)
{
	if (t->known) {
		cg_json_double(j, "launch_untraced_us", (double)t->untraced_ns / 1e3);
		cg_json_double(j, "launch_traced_us", (double)t->traced_ns / 1e3);
		cg_json_null(j, "tracing_unmeasured");
	} else {
		cg_json_null(j, "launch_untraced_us");
		cg_json_null(j, "launch_traced_us");
		cg_json_str(j, "tracing_unmeasured", t->why);
	}
}

/* The bounds without what tracing added: each launch call d shorter, where the GPU waited on it
 * the GPU's idle time (the untraced figure) and the wall time shorter by what the idle time
 * lost (where it was busy, the host was not what the step waited for). As traced, the
 * launch-gap bound too. Where tracing's cost is unknown, the bounds are the traced ones. */
static void floor_json(struct cg_json *j, const struct window *w, const struct tracing *t,
                       struct figures f, double untraced)
{
	double traced_gap = f.idle >= 0 && f.idle < f.wall ? f.wall / (f.wall - f.idle) : -1;
	bool without = untraced >= 0;
	if (without) {
		double d = (double)tracing_added(t) / 1e3;
		double host = f.host - d * (double)w->launches;
		f.wall -= f.idle - untraced;
		f.host = host > 0 ? host : 0;
		f.idle = untraced;
	}
	bounds_json(j, f.wall, f.host, f.busy, f.idle);
	cg_json_bool(j, "bounds_without_tracing", without);
	if (traced_gap > 0)
		cg_json_double(j, "launch_gap_bound_traced", traced_gap);
	else
		cg_json_null(j, "launch_gap_bound_traced");
}

void cg_floor_json(struct cg_json *j)
{
	if (!atomic_load_explicit(&cg_floor_timing, memory_order_relaxed))
		return;
	if (activity)
		cg_activity_flush();
	struct cg_activity_stats st;
	cg_activity_stats(&st);
	struct window w = {
		.t0 = started, .t1 = now(),
		.launches = atomic_load(&launch_calls), .host_ns = atomic_load(&launch_ns),
		.graph_launches = atomic_load(&graph_launches),
		.graph_launched = atomic_load(&graph_launched),
	};
	struct seq s;
	take_sequence(&s);
	w.to = s.n;
	pthread_mutex_lock(&lock);
	struct tracing t = tracing;
	pthread_mutex_unlock(&lock);
	if (activity && (t.end == UINT64_MAX || !cg_activity_running())) {
		activity = false;  /* the records after the pause are missing */
		activity_why = t.end == UINT64_MAX ?
		               "the run ended while kernel records were paused to time launch calls" :
		               "CUPTI did not resume its kernel records";
	}
	uint64_t complete_from = st.complete_from > t.end ? st.complete_from : t.end;
	find_window(&w, &s, complete_from);
	pthread_mutex_lock(&lock);
	if (!w.iterations && snaps)
		later_half(&w, &s, complete_from);
	pthread_mutex_unlock(&lock);

	cg_json_obj(j, "profile");
	/* "iterations": the window is that many whole iterations; "later_half": no iteration was
	 * found, the window is the later half of the run's launch calls, to exit; "run": the run
	 * from the first CUDA call to exit. */
	cg_json_str(j, "window", w.iterations ? "iterations" : w.later_half ? "later_half" : "run");
	cg_json_double(j, "wall_us", (double)(w.t1 - w.t0) / 1e3);
	cg_json_uint(j, "iterations", w.iterations);
	cg_json_uint(j, "period_events", w.period);
	cg_json_uint(j, "period_boundaries",
	             w.iterations ? (w.boundaries + w.iterations / 2) / w.iterations : 0);
	cg_json_uint(j, "period_disturbances", w.disturbances);
	cg_json_uint(j, "launch_calls", w.launches);
	cg_json_uint(j, "graph_launches", w.graph_launches);
	cg_json_uint(j, "graph_launched", w.graph_launched);
	cg_json_double(j, "launch_host_us", (double)w.host_ns / 1e3);
	cg_json_uint(j, "syncs", w.syncs);
	cg_json_uint(j, "waits", w.waits);
	cg_json_uint(j, "boundaries", atomic_load(&boundaries));
	struct figures f = { (double)(w.t1 - w.t0) / 1e3, (double)w.host_ns / 1e3, -1, -1 };
	double untraced = -1;
	gpu_json(j, &w, &s, st.records, &t, &f, &untraced);
	tracing_json(j, &t);
	floor_json(j, &w, &t, f, untraced);
	cg_json_uint(j, "activity_records", st.records);
	cg_json_uint(j, "dropped", st.dropped);
	cg_json_obj_end(j);
	free(s.t);
	free(s.ns);
	free(s.key);
}
