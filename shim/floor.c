/* Profile mode (floor.h): launch timing, the boundary-token ring and, at exit, the window of
 * whole iterations the summary's "profile" describes. Nothing here runs unless CUGRAFT_PROFILE
 * is on. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "activity.h"
#include "floor.h"
#include "json.h"
#include "log.h"
#include "policy/period.h"
#include "shim.h"

atomic_bool cg_floor_timing;

/* The last 64K boundaries: enough for a loop with a few hundred boundaries per iteration to
 * show its period many times over; the window lies in the latest iterations anyway. */
enum { TOKENS = 1 << 16, MAX_PERIOD = 1000, KIND_SHIFT = 24 };

struct tokens {
	uint32_t tok[TOKENS];       /* boundary kind << 24 | launches since the previous one */
	uint32_t launches[TOKENS];  /* launch calls and the launches of graphs */
	uint32_t graph[TOKENS];     /* of them in graphs */
	uint32_t graphs[TOKENS];    /* graph launches */
	uint64_t t[TOKENS];         /* when the boundary was made (the activity records' clock) */
	uint64_t host_ns[TOKENS];   /* time in launch calls since the previous boundary */
};

/* A loop that never waits has no boundary to find its iteration in: its figures then come
 * from the later half of the run's launch calls, between snapshots of the counters taken every
 * SNAP_EVERY of them (start-up and model building, which launch little, left out). */
enum { SNAP_EVERY = 4096, SNAPS = 1024 };
struct snap {
	uint64_t t, calls, host_ns, graphs, in_graphs;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tokens *ring;
static struct snap *snaps;
static uint64_t nsnaps;  /* taken so far, under lock (the latest SNAPS are kept) */
static uint64_t made, calls_before, ns_before, graph_before, graphs_before;  /* under lock */
static _Atomic uint64_t launch_calls, launch_ns;
static _Atomic uint64_t graph_launches, graph_launched;  /* graph launches, their nodes */
static uint64_t started;
static cg_clock_fn now = cg_monotonic_ns;
static bool activity;
static const char *activity_why;

static uint64_t mono(void)
{
	return cg_monotonic_ns();
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

void cg_floor_launch(uint64_t t0)
{
	uint64_t ns = cg_monotonic_ns() - t0;
	atomic_fetch_add_explicit(&launch_ns, ns, memory_order_relaxed);
	uint64_t calls = atomic_fetch_add_explicit(&launch_calls, 1, memory_order_relaxed) + 1;
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
	atomic_fetch_add_explicit(&graph_launched, launches, memory_order_relaxed);
	atomic_fetch_add_explicit(&graph_launches, 1, memory_order_relaxed);
}

void cg_floor_start(void)
{
	ring = malloc(sizeof(*ring));
	if (!ring) {
		cg_log(CG_LOG_WARN, "CUGRAFT_PROFILE: no memory for the boundary sequence; profile is off");
		return;
	}
	snaps = malloc(SNAPS * sizeof(*snaps));  /* without it, no later-half window: the run */
	cg_clock_fn clock = mono;
	activity = cg_activity_start(mono, &clock, &activity_why);
	now = clock;
	if (!activity)
		cg_log(CG_LOG_INFO, "CUGRAFT_PROFILE: no GPU busy time: %s", activity_why);
	started = now();
	atomic_store_explicit(&cg_floor_timing, true, memory_order_release);  /* ring, now */
	atomic_fetch_or(&cg_unsettled, CG_UNSETTLED_PROFILE);  /* every boundary is a token */
}

void cg_floor_token(enum cg_reason why)
{
	atomic_thread_fence(memory_order_acquire);  /* pairs with the store that turned timing on */
	/* How often a program polls depends on timing, not on its loop. */
	if (cg_tl_api && strstr(cg_tl_api, "Query"))
		return;
	pthread_mutex_lock(&lock);
	uint64_t calls = atomic_load_explicit(&launch_calls, memory_order_relaxed);
	uint64_t ns = atomic_load_explicit(&launch_ns, memory_order_relaxed);
	uint64_t in_graphs = atomic_load_explicit(&graph_launched, memory_order_relaxed);
	uint64_t graphs = atomic_load_explicit(&graph_launches, memory_order_relaxed);
	uint64_t graph = in_graphs - graph_before, since = calls - calls_before + graph;
	size_t i = (size_t)(made++ % TOKENS);
	ring->tok[i] = (uint32_t)why << KIND_SHIFT | (uint32_t)(since < 0xffffff ? since : 0xffffff);
	ring->launches[i] = since < UINT32_MAX ? (uint32_t)since : UINT32_MAX;
	ring->graph[i] = graph < UINT32_MAX ? (uint32_t)graph : UINT32_MAX;
	ring->graphs[i] = (uint32_t)(graphs - graphs_before);
	ring->t[i] = now();
	ring->host_ns[i] = ns - ns_before;
	calls_before = calls;
	ns_before = ns;
	graph_before = in_graphs;
	graphs_before = graphs;
	pthread_mutex_unlock(&lock);
}

/* What the window holds: whole iterations when a period was found, else the later half of the
 * run's launch calls where it made enough of them, else the whole run. */
struct window {
	uint64_t t0, t1, launches, host_ns, syncs;
	uint64_t graph_launches, graph_launched;  /* the program's own graphs and their nodes */
	size_t iterations, period, disturbances;
	bool later_half;
};

/* Called with the lock held. tok/w: the ring in order (n tokens, the oldest first). */
static void find_window(struct window *w, const uint32_t *tok, const uint32_t *wt, size_t n,
                        uint64_t complete_from)
{
	size_t base = (size_t)(made - n);  /* ring index of tok[0] is (base + k) % TOKENS */
#define AT(field, k) ring->field[(base + (k)) % TOKENS]
	struct cg_period p;
	if (!cg_period_find(tok, wt, n, MAX_PERIOD, &p))
		return;
	size_t first = p.first, tokens = p.tokens, iters = p.iterations;
	/* The window opens at the boundary before its first token; where GPU intervals were
	 * overwritten (a long run), it opens later, by whole iterations. */
	while (iters > 1 && tokens > p.period &&
	       (first == 0 || (activity && AT(t, first - 1) < complete_from))) {
		first += p.period;
		tokens -= p.period;
		iters--;
	}
	if (first == 0)
		return;
	size_t last = first + tokens - 1;
	/* A loop with no boundary inside is one token, however many launches it makes; what then
	 * repeats is what comes after it (its results read one by one). Iterations that together
	 * launch less than one stretch without a boundary elsewhere are not where the program
	 * works. (Not a share of all launches: a compile phase before a loop that replays graphs
	 * can launch more than the loop.) */
	uint64_t in = 0, single = 0;
	for (size_t k = 0; k < n; k++)
		if ((k < first || k > last) && wt[k] > single)
			single = wt[k];
	for (size_t k = first; k <= last; k++)
		in += AT(launches, k);
	if (in < single)
		return;
	w->t0 = AT(t, first - 1);
	w->t1 = AT(t, last);
	w->launches = w->host_ns = w->syncs = w->graph_launches = w->graph_launched = 0;
	for (size_t k = first; k <= last; k++) {
		w->launches += AT(launches, k) - AT(graph, k);
		w->graph_launched += AT(graph, k);
		w->graph_launches += AT(graphs, k);
		w->host_ns += AT(host_ns, k);
		w->syncs += tok[k] >> KIND_SHIFT == CG_R_SYNC;
	}
	w->iterations = iters;
	w->period = p.period;
	w->disturbances = p.disturbances;
#undef AT
}

/* No iteration found: the window opens at the first snapshot at or past half the run's launch
 * calls (and after GPU intervals start being complete) and runs to the end; the syncs in it are
 * counted from the boundaries made after it opened. Called with the lock held. */
static void later_half(struct window *w, uint64_t complete_from)
{
	uint64_t kept = nsnaps < SNAPS ? nsnaps : SNAPS;
	for (uint64_t k = nsnaps - kept; k < nsnaps; k++) {
		const struct snap *p = &snaps[k % SNAPS];
		if (2 * p->calls < w->launches || (activity && p->t < complete_from))
			continue;
		if (p->calls == w->launches)
			return;  /* nothing after it */
		w->t0 = p->t;
		w->launches -= p->calls;
		w->host_ns -= p->host_ns;
		w->graph_launches -= p->graphs;
		w->graph_launched -= p->in_graphs;
		w->syncs = 0;
		size_t n = made < TOKENS ? (size_t)made : TOKENS;
		for (size_t i = 0; i < n; i++) {
			size_t at = (size_t)((made - n + i) % TOKENS);
			w->syncs += ring->t[at] > p->t && ring->tok[at] >> KIND_SHIFT == CG_R_SYNC;
		}
		w->later_half = true;
		return;
	}
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
	pthread_mutex_lock(&lock);
	size_t n = made < TOKENS ? (size_t)made : TOKENS;
	uint32_t *tok = malloc((n ? n : 1) * sizeof(*tok)), *wt = malloc((n ? n : 1) * sizeof(*wt));
	if (tok && wt) {
		size_t base = (size_t)(made - n);
		for (size_t k = 0; k < n; k++) {
			tok[k] = ring->tok[(base + k) % TOKENS];
			wt[k] = ring->launches[(base + k) % TOKENS];
		}
		find_window(&w, tok, wt, n, st.complete_from);
	}
	if (!w.iterations && snaps)
		later_half(&w, st.complete_from);
	uint64_t boundaries = made;
	pthread_mutex_unlock(&lock);
	free(tok);
	free(wt);

	cg_json_obj(j, "profile");
	/* "iterations": the window is that many whole iterations; "later_half": no iteration was
	 * found, the window is the later half of the run's launch calls, to exit; "run": the run
	 * from the first CUDA call to exit. */
	cg_json_str(j, "window", w.iterations ? "iterations" : w.later_half ? "later_half" : "run");
	cg_json_double(j, "wall_us", (double)(w.t1 - w.t0) / 1e3);
	cg_json_uint(j, "iterations", w.iterations);
	cg_json_uint(j, "period_boundaries", w.period);
	cg_json_uint(j, "period_disturbances", w.disturbances);
	cg_json_uint(j, "launch_calls", w.launches);
	cg_json_uint(j, "graph_launches", w.graph_launches);
	cg_json_uint(j, "graph_launched", w.graph_launched);
	cg_json_double(j, "launch_host_us", (double)w.host_ns / 1e3);
	cg_json_uint(j, "syncs", w.syncs);
	cg_json_uint(j, "boundaries", boundaries);
	/* Without records the GPU busy time is unknown, not zero. */
	if (activity && st.records > 0) {
		int dev;
		uint64_t busy = cg_activity_busy(w.t0, w.t1, &dev);
		cg_json_double(j, "gpu_busy_us", (double)busy / 1e3);
		cg_json_int(j, "gpu_busy_device", dev);
	} else {
		cg_json_null(j, "gpu_busy_us");
		cg_json_str(j, "gpu_busy_unavailable",
		            activity ? "CUPTI recorded no GPU activity" : activity_why);
	}
	cg_json_uint(j, "activity_records", st.records);
	cg_json_uint(j, "dropped", st.dropped);
	cg_json_obj_end(j);
}
