/* Internal interface of the CPU fake CUDA driver: handle objects, the per-entry-point
 * accounting (call counts, FAKECUDA_LOG, FAKECUDA_FAIL) and the built-in host kernels.
 * "Device" memory is host memory and every kernel runs on the calling thread at launch. */
#pragma once
#include "protos.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum cg_api {
#define CG_API(sym, base, ver, ptsz) CG_API_##sym,
#include "api.def"
#undef CG_API
  CG_API_COUNT
};

/* Counters written to FAKECUDA_STATS. */
struct cg_counters {
  atomic_ullong kernels_run, launch_eager, graph_launches, graph_nodes_run, captured_nodes,
                memops_run, faults_injected,
                query_errors,   /* function/kernel queries answered with an error */
                launch_shapes;  /* sum over kernels run of a hash of (kernel, cg_shape): two runs
                                   sum equally when the same kernels ran with the same shapes */
};
extern struct cg_counters cg_count;

/* Counts the call, logs it and applies FAKECUDA_FAIL: a non-zero result means the call must
 * return it at once, with no side effect. */
CUresult cg_enter(enum cg_api id);
#define CG_ENTER(sym) do { CUresult cg_r_ = cg_enter(CG_API_##sym); \
                           if (cg_r_ != CUDA_SUCCESS) return cg_r_; } while (0)
/* An entry point and its _ptsz twin, each counted and fault-injected under its own name; in the
 * twin, stream 0 means the per-thread default stream (the fake keeps one for all threads: work
 * runs at submission, so ordering between them is moot). */
extern _Thread_local bool cg_tl_ptsz;
#define CG_TWINS(sym, params, call)                                                             \
  CUresult CUDAAPI sym params { CG_ENTER(sym); return call; }                                   \
  CUresult CUDAAPI sym##_ptsz params                                                            \
  {                                                                                             \
    CG_ENTER(sym##_ptsz);                                                                       \
    cg_tl_ptsz = true;                                                                          \
    CUresult r_ = call;                                                                         \
    cg_tl_ptsz = false;                                                                         \
    return r_;                                                                                  \
  }

/* The same for an `api@capture` FAKECUDA_FAIL rule, at the point the entry point this thread
 * entered adds a node to a capturing stream. */
CUresult cg_enter_capture(void);
/* The launch shape a kernel runs with: what device code reads as gridDim and blockDim, and its
 * dynamic shared memory. */
struct cg_shape { unsigned grid[3], block[3], shmem; };
void cg_log_run(const char *kernel_name, const struct cg_shape *shape);
bool cg_initialized(void);  /* cuInit has succeeded */

/* One lock for all object state; kernels themselves run outside it (except inside a graph
 * launch, which must see a stable executable graph). */
extern pthread_mutex_t cg_lock;

/* ---- built-in kernels ---- */
/* The running kernel's shape, as CUDA's gridDim/blockDim built-ins (set around each run). */
extern _Thread_local struct cg_shape cg_tl_shape;
#define CG_MAX_PARAMS 4
struct cg_kernel_def {
  const char *name;
  void (*run)(void *const *args);  /* args[i] points to parameter i's bytes */
  unsigned nparams;
  unsigned size[CG_MAX_PARAMS], offset[CG_MAX_PARAMS];
  unsigned total;                  /* bytes of the packed parameter buffer */
  unsigned max_threads;            /* threads per block it allows (launch bounds); 0: 1024 */
};

/* ---- handles: each object starts with a magic so a handle of the wrong kind is rejected ---- */
enum cg_magic {
  CG_DEAD = 0, CG_CTX = 0x43545820, CG_MODULE, CG_FUNC, CG_KERNEL, CG_STREAM, CG_EVENT, CG_GRAPH,
  CG_NODE, CG_EXEC,
};

struct cg_ctx { enum cg_magic magic; bool primary; };
bool cg_ctx_live(CUcontext c);
CUcontext cg_ctx_current(void);
/* A context is destroyed: the modules loaded in it die with it (their function handles too). */
void cg_modules_ctx_gone(CUcontext ctx);
CUresult cg_need_ctx(void);  /* CUDA_ERROR_INVALID_CONTEXT unless a live context is current */

/* A CUfunction or a CUkernel (distinct objects, as in the real driver). */
struct cg_func {
  enum cg_magic magic;
  const struct cg_kernel_def *def;
  struct cg_func *other;  /* CUkernel -> its CUfunction */
  void *owner;            /* the module (CUfunction) or library (CUkernel) it belongs to */
  int attr[CU_FUNC_ATTRIBUTE_MAX];
};
/* The definition behind a launch handle, which may be a CUfunction or a CUkernel. */
const struct cg_kernel_def *cg_launch_def(CUfunction f);

/* A graph node. Kernel nodes own a copy of their parameter bytes. */
enum cg_node_kind { CG_NODE_KERNEL, CG_NODE_MEMSET, CG_NODE_MEMCPY, CG_NODE_HOST };
struct cg_node {
  enum cg_magic magic;
  enum cg_node_kind kind;
  union {
    struct {
      CUfunction func; CUkernel kern;  /* the handle the node was made with */
      const struct cg_kernel_def *def;
      unsigned grid[3], block[3], shmem;
      unsigned char *bytes;            /* def->total bytes */
      void *args[CG_MAX_PARAMS];       /* into bytes */
      unsigned nattrs;
      CUlaunchAttribute attrs[4];
    } k;
    struct { CUdeviceptr dst; unsigned value, elem; size_t width, height, pitch; } set;
    struct { CUdeviceptr dst, src; size_t bytes; } cpy;
    struct { CUhostFn fn; void *data; } host;  /* a captured cuLaunchHostFunc */
  } u;
};
/* What the real driver refuses at launch, capture or node update: a zero or too large
 * dimension, a block beyond the function's threads per block, dynamic shared memory above 48 KiB
 * beyond the function's CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, a grid that is no
 * multiple of the launch's cluster dimension (attrs, may be NULL). */
CUresult cg_shape_check(CUfunction f, const struct cg_shape *shape, const CUlaunchAttribute *attrs,
                        unsigned nattrs);
/* Fills a kernel node from a launch handle and program arguments (kernelParams or extra). */
CUresult cg_node_set_kernel(struct cg_node *n, CUfunction f, const unsigned grid[3],
                            const unsigned block[3], unsigned shmem, void **params, void **extra);
void cg_node_clear(struct cg_node *n);
void cg_node_run(const struct cg_node *n);  /* executes the node, counts graph_nodes_run */

struct cg_graph {
  enum cg_magic magic;
  size_t n, cap;
  struct cg_node **nodes;
};
/* Appends a node (copied) to g; returns it or NULL when out of memory. Caller holds cg_lock. */
struct cg_node *cg_graph_append(struct cg_graph *g, const struct cg_node *n);
struct cg_graph *cg_graph_new(void);
void cg_graph_free(struct cg_graph *g);

struct cg_stream {
  enum cg_magic magic;
  unsigned flags;
  CUcontext ctx;
  /* stream capture */
  CUstreamCaptureStatus capture;
  cuuint64_t capture_id;
  struct cg_graph *graph;
  CUgraphNode last;  /* dependency set of the capture: the last node added */
  atomic_ullong gpu_ns;  /* simulated GPU time of the work run on it (cg_gpu_run) */
};
/* Simulated GPU time: every op run on a stream advances its clock, by 2 us eagerly and 1 us as
 * a graph node, or 10 us as a graph node under FAKECUDA_GRAPH_SLOW=1 (graphs slower than eager
 * by more than the 3.4 us of host time a launch costs: the cost gate disables them). Two events recorded on one stream measure that clock; on two streams,
 * wall-clock time. */
void cg_gpu_run(struct cg_stream *s, size_t ops, bool graph);
/* The device timeline, where a fake CUPTI turned it on (fakecuda_activity) or FAKECUDA_GPU_NS is
 * set (on the monotonic clock, from the first op): one device running
 * every stream's ops in submission order, each FAKECUDA_GPU_NS long (default: the times above),
 * starting once its launch call has spent its host time (FAKECUDA_SPIN_NS) and the device is
 * free; a synchronous call waits, spinning, until the device is done (an op of its own first,
 * for a synchronous copy or memset). Off, nothing waits: work runs at submission. */
void cg_gpu_wait(bool op);
/* Called by the fake CUPTI as kernel records go on and off: while on, each launch call spends
 * launch_ns more on the host before its submission (what tracing adds on a GPU); while off, the
 * timeline runs unrecorded. */
void fakecuda_tracing(bool recorded, long long launch_ns);
void cg_host_spin(bool graph, size_t ops);
void cg_host_spin_build(size_t nodes);
/* Resolves a stream handle (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or created); NULL if bad. */
struct cg_stream *cg_stream_get(CUstream s);
bool cg_capturing(struct cg_stream *s);
/* Appends n (taking ownership) to the capture graph of s and makes it the capture's dependency. */
CUresult cg_capture_node(struct cg_stream *s, struct cg_node *n);
/* A boundary operation on a capturing stream: invalidates the capture, as the real driver does. */
CUresult cg_capture_refuse(struct cg_stream *s);

/* Memory operations shared by eager calls and graph nodes. */
void cg_memset(CUdeviceptr dst, unsigned value, unsigned elem, size_t n);
/* [p, p + n) inside one live allocation (memory.c). */
bool cg_mem_range_ok(CUdeviceptr p, size_t n);
/* Device memory an instantiated graph of `nodes` nodes holds: taken from what cuMemGetInfo
 * reports free (returns how much), given back when it is destroyed. */
size_t cg_graph_mem_take(size_t nodes);
void cg_graph_mem_give(size_t bytes);
