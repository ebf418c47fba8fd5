/* Streams, stream capture and events of the fake driver. Work runs at submission, so every
 * stream is always idle and every event complete; synchronisation calls are only counted,
 * except on a capturing stream, where they are refused as the real driver refuses them. */
#include "fake.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The legacy and per-thread default streams (one for all threads: ordering is moot here). */
static struct cg_stream legacy = { .magic = CG_STREAM }, per_thread = { .magic = CG_STREAM };
static cuuint64_t capture_ids;
_Thread_local bool cg_tl_ptsz;

struct cg_stream *cg_stream_get(CUstream h)
{
  if (!h) return cg_tl_ptsz ? &per_thread : &legacy;
  if (h == CU_STREAM_LEGACY) return &legacy;
  if (h == CU_STREAM_PER_THREAD) return &per_thread;
  struct cg_stream *s = (struct cg_stream *)h;
  return s->magic == CG_STREAM && cg_ctx_live(s->ctx) ? s : NULL;
}

bool cg_capturing(struct cg_stream *s)
{
  pthread_mutex_lock(&cg_lock);
  bool capturing = s->capture != CU_STREAM_CAPTURE_STATUS_NONE;
  pthread_mutex_unlock(&cg_lock);
  return capturing;
}

CUresult cg_capture_node(struct cg_stream *s, struct cg_node *n)
{
  CUresult r = cg_enter_capture();
  if (r != CUDA_SUCCESS) return r;
  r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  pthread_mutex_lock(&cg_lock);
  if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    struct cg_node *added = cg_graph_append(s->graph, n);
    r = added ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    if (added) {
      s->last = (CUgraphNode)added;
      atomic_fetch_add_explicit(&cg_count.captured_nodes, 1, memory_order_relaxed);
    }
  } else if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  }
  pthread_mutex_unlock(&cg_lock);
  return r;
}

CUresult cg_capture_refuse(struct cg_stream *s)
{
  pthread_mutex_lock(&cg_lock);
  if (s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) s->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
  pthread_mutex_unlock(&cg_lock);
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

static CUresult stream_new(CUstream *phStream, unsigned flags)
{
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  struct cg_stream *s = calloc(1, sizeof *s);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  s->magic = CG_STREAM;
  s->flags = flags;
  s->ctx = cg_ctx_current();
  *phStream = (CUstream)s;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
  CG_ENTER(cuStreamCreate);
  return stream_new(phStream, Flags);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
  CG_ENTER(cuStreamCreateWithPriority);
  return stream_new(phStream, flags);  /* priorities do not matter here */
}

/* Destroyed streams stay allocated but dead: stale handles fail instead of crashing. */
CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
  CG_ENTER(cuStreamDestroy_v2);
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s || s == &legacy || s == &per_thread) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&cg_lock);
  s->magic = CG_DEAD;
  pthread_mutex_unlock(&cg_lock);
  return CUDA_SUCCESS;
}

static CUresult stream_wait(CUstream hStream, bool sync)
{
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (cg_capturing(s)) return cg_capture_refuse(s);
  if (sync) cg_gpu_wait(false);
  return CUDA_SUCCESS;
}

CG_TWINS(cuStreamSynchronize, (CUstream hStream),
          stream_wait(hStream, true))

CG_TWINS(cuStreamQuery, (CUstream hStream),
          stream_wait(hStream, false))

static CUresult get_flags(CUstream hStream, unsigned int *flags)
{
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = s->flags;
  return CUDA_SUCCESS;
}

CG_TWINS(cuStreamGetFlags, (CUstream hStream, unsigned int *flags),
          get_flags(hStream, flags))

static CUresult get_ctx(CUstream hStream, CUcontext *pctx)
{
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  if (s->ctx) { *pctx = s->ctx; return CUDA_SUCCESS; }
  CUresult r = cg_need_ctx();  /* default streams belong to the current context */
  if (r == CUDA_SUCCESS) *pctx = cg_ctx_current();
  return r;
}

CG_TWINS(cuStreamGetCtx, (CUstream hStream, CUcontext *pctx),
          get_ctx(hStream, pctx))

/* The device timeline (fake.h): off until a fake CUPTI calls fakecuda_activity, or FAKECUDA_GPU_NS
 * turns it on (timeline_default). */
static struct {
  pthread_mutex_t lock;
  uint64_t (*_Atomic clock)(void);
  void (*record)(uint64_t start, uint64_t end);
  uint64_t free_at;      /* when the device has run everything submitted */
  long long op_ns;       /* FAKECUDA_GPU_NS, or -1: the per-op times of cg_gpu_run */
} timeline = { PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, -1 };

/* fakecuda_tracing (fake.h): what tracing adds to each launch call, and whether kernels are
 * recorded. */
static atomic_llong tracing_ns;
static atomic_bool paused;
static void spin_ns(long long ns);

void fakecuda_tracing(bool recorded, long long launch_ns)
{
  atomic_store(&paused, !recorded);
  atomic_store(&tracing_ns, recorded ? launch_ns : 0);
}

void fakecuda_activity(uint64_t (*clock)(void), void (*record)(uint64_t start, uint64_t end))
{
  const char *v = getenv("FAKECUDA_GPU_NS");
  pthread_mutex_lock(&timeline.lock);
  timeline.record = record;
  timeline.op_ns = v && *v ? atoll(v) : -1;
  timeline.free_at = 0;
  pthread_mutex_unlock(&timeline.lock);
  atomic_store(&timeline.clock, clock);
}

/* ops of per_op ns each, one after the other, from when the device is free. */
static void timeline_run(size_t ops, unsigned long long per_op)
{
  uint64_t (*clock)(void) = atomic_load(&timeline.clock);
  if (!clock) return;
  pthread_mutex_lock(&timeline.lock);
  uint64_t ns = timeline.op_ns >= 0 ? (uint64_t)timeline.op_ns : per_op, t = clock();
  uint64_t start = t > timeline.free_at ? t : timeline.free_at;
  for (size_t k = 0; k < ops; k++, start += ns)
    if (!atomic_load(&paused)) timeline.record(start, start + ns);
  timeline.free_at = start;
  pthread_mutex_unlock(&timeline.lock);
}

/* FAKECUDA_GPU_NS set and no fake CUPTI: the timeline on the monotonic clock, unrecorded, so
 * that a program's waits take what its device work takes (checked once, at the first op). */
static uint64_t monotonic(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void unrecorded(uint64_t start, uint64_t end)
{
  (void)start;
  (void)end;
}

static void timeline_default(void)
{
  static atomic_bool checked;
  if (atomic_load_explicit(&checked, memory_order_acquire)) return;
  const char *v = getenv("FAKECUDA_GPU_NS");
  if (v && *v && !atomic_load(&timeline.clock)) fakecuda_activity(monotonic, unrecorded);
  atomic_store_explicit(&checked, true, memory_order_release);
}

void cg_gpu_run(struct cg_stream *s, size_t ops, bool graph)
{
  static atomic_int graph_slow = -1;
  timeline_default();
  if (atomic_load_explicit(&graph_slow, memory_order_relaxed) < 0) {
    const char *v = getenv("FAKECUDA_GRAPH_SLOW");
    atomic_store_explicit(&graph_slow, v && *v == '1', memory_order_relaxed);
  }
  unsigned long long per_op = !graph ? 2000
                            : atomic_load_explicit(&graph_slow, memory_order_relaxed) ? 10000 : 1000;
  atomic_fetch_add_explicit(&s->gpu_ns, ops * per_op, memory_order_relaxed);
  spin_ns(atomic_load_explicit(&tracing_ns, memory_order_relaxed));  /* (before the submission) */
  cg_host_spin(graph, ops);
  timeline_run(ops, per_op);  /* the ops start once their launch call has done its work */
}

void cg_gpu_wait(bool op)
{
  uint64_t (*clock)(void) = atomic_load(&timeline.clock);
  if (!clock) return;
  if (op) timeline_run(1, 2000);
  pthread_mutex_lock(&timeline.lock);
  uint64_t until = timeline.free_at;
  pthread_mutex_unlock(&timeline.lock);
  while (clock() < until) {}
}

/* FAKECUDA_SPIN_NS=EAGER,GRAPH[,BUILD]: the host spins EAGER ns per op launched eagerly, GRAPH
 * ns per graph launch and BUILD ns per node a graph is instantiated with, so that wall time
 * (what cugraft's controller measures) favours one mode, or shows what builds cost once (about
 * 5 us a node on an H200). */
static atomic_llong spin[3] = { -1, -1, -1 };

static void spin_ns(long long ns)
{
  if (ns <= 0) return;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do clock_gettime(CLOCK_MONOTONIC, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) < ns);
}

static void spin_init(void)
{
  if (atomic_load_explicit(&spin[0], memory_order_relaxed) >= 0) return;
  const char *v = getenv("FAKECUDA_SPIN_NS");
  long long e = 0, g = 0, b = 0;
  if (v) sscanf(v, "%lld,%lld,%lld", &e, &g, &b);
  atomic_store_explicit(&spin[2], b, memory_order_relaxed);
  atomic_store_explicit(&spin[1], g, memory_order_relaxed);
  atomic_store_explicit(&spin[0], e < 0 ? 0 : e, memory_order_relaxed);
}

void cg_host_spin(bool graph, size_t ops)
{
  spin_init();
  spin_ns(graph ? atomic_load_explicit(&spin[1], memory_order_relaxed)
                : atomic_load_explicit(&spin[0], memory_order_relaxed) * (long long)ops);
}

void cg_host_spin_build(size_t nodes)
{
  spin_init();
  spin_ns(atomic_load_explicit(&spin[2], memory_order_relaxed) * (long long)nodes);
}

struct cg_event {
  enum cg_magic magic;
  unsigned flags;
  bool recorded;
  struct timespec when;
  const struct cg_stream *on;  /* where it was last recorded, and that stream's clock then */
  unsigned long long gpu_ns;
};

static struct cg_event *event_get(CUevent h)
{
  struct cg_event *e = (struct cg_event *)h;
  return e && e->magic == CG_EVENT ? e : NULL;
}

/* Cross-stream dependencies inside a capture are not modelled; refused like a boundary. */
static CUresult wait_event(CUstream hStream, CUevent hEvent)
{
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s || !event_get(hEvent)) return CUDA_ERROR_INVALID_HANDLE;
  return cg_capturing(s) ? cg_capture_refuse(s) : CUDA_SUCCESS;
}

CG_TWINS(cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags),
          wait_event(hStream, hEvent))

static CUresult is_capturing(CUstream hStream, CUstreamCaptureStatus *status)
{
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  *status = s->capture;
  pthread_mutex_unlock(&cg_lock);
  return CUDA_SUCCESS;
}

CG_TWINS(cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus *captureStatus),
          is_capturing(hStream, captureStatus))

static CUresult begin_capture(CUstream hStream)
{
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (s == &legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  struct cg_graph *g = cg_graph_new();
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = CUDA_ERROR_ILLEGAL_STATE;
  pthread_mutex_lock(&cg_lock);
  if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE) {
    s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    s->capture_id = ++capture_ids;
    s->graph = g;
    s->last = NULL;
    r = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&cg_lock);
  if (r != CUDA_SUCCESS) cg_graph_free(g);
  return r;
}

CG_TWINS(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode),
          begin_capture(hStream))

static CUresult end_capture(CUstream hStream, CUgraph *phGraph)
{
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!phGraph) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  CUstreamCaptureStatus status = s->capture;
  struct cg_graph *g = s->graph;
  if (status != CU_STREAM_CAPTURE_STATUS_NONE) {
    s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
    s->graph = NULL;
    s->last = NULL;
  }
  pthread_mutex_unlock(&cg_lock);
  *phGraph = NULL;
  if (status == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
  if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
    cg_graph_free(g);
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *phGraph = (CUgraph)g;
  return CUDA_SUCCESS;
}

CG_TWINS(cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph),
          end_capture(hStream, phGraph))

/* The dependency set is {last node added}: it lets a caller map each captured op to its node.
 * It points into the stream, valid until the next operation on it, as in the real driver. */
static CUresult capture_info(CUstream hStream, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *ndeps)
{
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  bool active = s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  *status = s->capture;
  if (id) *id = active ? s->capture_id : 0;
  if (graph) *graph = active ? (CUgraph)s->graph : NULL;
  if (deps) *deps = active && s->last ? &s->last : NULL;
  if (edges) *edges = NULL;
  if (ndeps) *ndeps = active && s->last ? 1 : 0;
  pthread_mutex_unlock(&cg_lock);
  return CUDA_SUCCESS;
}

CG_TWINS(cuStreamGetCaptureInfo_v3,
          (CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out,
           CUgraph *graph_out, const CUgraphNode **dependencies_out,
           const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out),
          capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                      edgeData_out, numDependencies_out))

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
  CG_ENTER(cuEventCreate);
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (!phEvent) return CUDA_ERROR_INVALID_VALUE;
  struct cg_event *e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  e->magic = CG_EVENT;
  e->flags = Flags;
  *phEvent = (CUevent)e;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
  CG_ENTER(cuEventDestroy_v2);
  struct cg_event *e = event_get(hEvent);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  e->magic = CG_DEAD;  /* kept allocated: a poller may still hold the handle */
  return CUDA_SUCCESS;
}

static CUresult record(CUevent hEvent, CUstream hStream)
{
  struct cg_event *e = event_get(hEvent);
  struct cg_stream *s = cg_stream_get(hStream);
  if (!e || !s) return CUDA_ERROR_INVALID_HANDLE;
  if (cg_capturing(s)) return cg_capture_refuse(s);
  pthread_mutex_lock(&cg_lock);
  clock_gettime(CLOCK_MONOTONIC, &e->when);
  e->on = s;
  e->gpu_ns = atomic_load_explicit(&s->gpu_ns, memory_order_relaxed);
  e->recorded = true;
  pthread_mutex_unlock(&cg_lock);
  return CUDA_SUCCESS;
}

CG_TWINS(cuEventRecord, (CUevent hEvent, CUstream hStream),
          record(hEvent, hStream))

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
  CG_ENTER(cuEventQuery);
  return event_get(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
  CG_ENTER(cuEventSynchronize);
  if (!event_get(hEvent)) return CUDA_ERROR_INVALID_HANDLE;
  cg_gpu_wait(false);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
  CG_ENTER(cuEventElapsedTime_v2);
  struct cg_event *a = event_get(hStart), *b = event_get(hEnd);
  if (!a || !b) return CUDA_ERROR_INVALID_HANDLE;
  if (!pMilliseconds) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  bool ok = a->recorded && b->recorded && !((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING);
  double ms = a->on == b->on ? ((double)b->gpu_ns - (double)a->gpu_ns) / 1e6
            : (double)(b->when.tv_sec - a->when.tv_sec) * 1e3 +
              (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e6;
  pthread_mutex_unlock(&cg_lock);
  if (!ok) return CUDA_ERROR_INVALID_HANDLE;
  *pMilliseconds = (float)ms;
  return CUDA_SUCCESS;
}
