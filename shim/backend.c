/* Real-driver backend (backend.h). Chunk graphs are made by capturing the recorded ops on a
 * private stream: the driver then encodes every launch form (CUkernel handles, attributes such as
 * clusters or programmatic serialisation, memsets, copies) exactly as an eager launch would, and
 * cuStreamGetCaptureInfo names the node each op became, which is what patching needs. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checks.h"
#include "driver.h"
#include "events.h"
#include "shim.h"
#include "sig.h"
#include "stream.h"

extern _Thread_local int cg_tl_forwarding;

struct chunk_graph {
	CUgraph graph;
	CUgraphExec exec;
	CUcontext ctx;
	uint32_t n;
	CUgraphNode *nodes;
	CUDA_KERNEL_NODE_PARAMS *kp; /* kernel nodes' parameters as captured (function, context;
	                                shape and parameters are each patch's own) */
};

/* --- contexts ------------------------------------------------------------------------------ */
#define DEAD_CTXS 16
static _Atomic(CUcontext) dead_ctx[DEAD_CTXS];
static atomic_uint dead_next;

void cg_backend_context_gone(CUcontext ctx)
{
	atomic_store(&dead_ctx[atomic_fetch_add(&dead_next, 1) % DEAD_CTXS], ctx);
}

static bool ctx_dead(CUcontext ctx)
{
	if (atomic_load(&cg_shim.driver_gone))
		return true;
	for (int i = 0; i < DEAD_CTXS; i++)
		if (atomic_load(&dead_ctx[i]) == ctx)
			return true;
	return false;
}

int cg_ctx_enter(CUcontext ctx)
{
	CUcontext cur = NULL;
	CG_REAL(cuCtxGetCurrent)(&cur);
	if (cur == ctx || !ctx)
		return CG_CTX_KEPT;
	return CG_REAL(cuCtxPushCurrent_v2)(ctx) == CUDA_SUCCESS ? CG_CTX_PUSHED : CG_CTX_FAILED;
}

void cg_ctx_leave(int entered)
{
	if (entered == CG_CTX_PUSHED) {
		CUcontext popped;
		CG_REAL(cuCtxPopCurrent_v2)(&popped);
	}
}

/* Backend work may run on any thread (the flusher, an observer): the stream's context current
 * for the duration, the thread's own context as it was afterwards, and the calls made meanwhile
 * the shim's own. CG_CTX_FAILED: nothing may be submitted (it would go to another context). */
int cg_backend_enter(CUcontext ctx)
{
	cg_tl_internal++;
	cg_tl_forwarding++;
	return cg_ctx_enter(ctx);
}

void cg_backend_leave(int entered)
{
	cg_ctx_leave(entered);
	cg_tl_forwarding--;
	cg_tl_internal--;
}

static int fail(CUresult r, const char **detail)
{
	if (detail) {
		const char *name = NULL;
		if (!cg_real[CG_E_cuGetErrorName] || CG_REAL(cuGetErrorName)(r, &name) != CUDA_SUCCESS)
			name = "CUDA_ERROR_UNKNOWN";
		*detail = name;
	}
	return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

/* --- one op on a stream -------------------------------------------------------------------- */
#define INLINE_PARAMS 64

/* kernelParams for a kernel op: pointers into its packed parameter bytes (after its launch
 * shape, sig.h) at the layout's offsets; in `inline_buf` (INLINE_PARAMS entries) when they fit,
 * else malloc'd (free when different from inline_buf); NULL when out of memory. */
static void **param_ptrs(const struct cg_op *op, void **inline_buf)
{
	const struct cg_layout *l = cg_sig_layout(op->sig);
	void **params = l->n <= INLINE_PARAMS ? inline_buf : malloc(l->n * sizeof(void *));
	for (uint32_t i = 0; params && i < l->n; i++)
		params[i] = (char *)cg_op_params(op->args) + l->p[i].off;
	return params;
}

static uint64_t mem_arg(const struct cg_op *op, int i)
{
	uint64_t v;
	memcpy(&v, (const char *)op->args + i * sizeof(v), sizeof(v));
	return v;
}

static CUresult submit(const struct cg_op *op, CUstream st)
{
	struct cg_sig copy;
	const struct cg_sig *sig = cg_sig_read(&copy, op->sig, op->sig_len);
	switch (sig->kind) {
	case CG_K_KERNEL: {
		const struct cg_layout *l = sig->layout;
		void *inline_params[INLINE_PARAMS];
		void **params = param_ptrs(op, inline_params);
		if (!params)
			return CUDA_ERROR_OUT_OF_MEMORY;
		struct cg_launch_shape sh = cg_op_shape(op->args); /* this launch's own */
		CUlaunchConfig c = {
			.gridDimX = sh.grid[0], .gridDimY = sh.grid[1], .gridDimZ = sh.grid[2],
			.blockDimX = sh.block[0], .blockDimY = sh.block[1], .blockDimZ = sh.block[2],
			.sharedMemBytes = sh.shmem, .hStream = st,
			.attrs = (CUlaunchAttribute *)sig->attrs, .numAttrs = sig->nattrs,
		};
		CUresult r = CG_REAL(cuLaunchKernelEx)(&c, (CUfunction)(uintptr_t)sig->fn,
		                                       l->n ? params : NULL, NULL);
		if (params != inline_params)
			free(params);
		return r;
	}
	case CG_K_MEMSET8:
		return CG_REAL(cuMemsetD8Async)(mem_arg(op, 0), (unsigned char)mem_arg(op, 1), sig->b, st);
	case CG_K_MEMSET32:
		return CG_REAL(cuMemsetD32Async)(mem_arg(op, 0), (unsigned int)mem_arg(op, 1), sig->b, st);
	case CG_K_COPY:
		return CG_REAL(cuMemcpyDtoDAsync_v2)(mem_arg(op, 0), mem_arg(op, 1), sig->b, st);
	}
	return CUDA_ERROR_INVALID_VALUE;
}

/* Where this thread submits the stream's work (a per-thread stream: ptds.h). Context entered. */
static CUresult target(struct cg_sstate *s, CUstream *st)
{
	*st = s->per_thread ? cg_ptds_target(s) : s->handle;
	return *st ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static int be_eager(void *be, void *stream, const struct cg_op *op, const char **detail)
{
	struct cg_sstate *s = stream;
	CUstream st;
	int in = cg_backend_enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : target(s, &st);
	if (r == CUDA_SUCCESS)
		r = submit(op, st);
	cg_backend_leave(in);
	return r == CUDA_SUCCESS ? 0 : fail(r, detail);
}

/* --- chunk graphs -------------------------------------------------------------------------- */
static void graph_free(struct chunk_graph *g)
{
	if (!ctx_dead(g->ctx)) {
		if (g->exec)
			CG_REAL(cuGraphExecDestroy)(g->exec);
		if (g->graph)
			CG_REAL(cuGraphDestroy)(g->graph);
	}
	free(g->nodes);
	free(g->kp);
	free(g);
}

static int be_build(void *be, void *stream, const struct cg_op *ops, uint32_t n, void **out,
                    const char **detail)
{
	struct cg_sstate *s = stream;
	if (atomic_load(&cg_shim.captures) > 0) {
		/* A global-mode capture of the program's would see ours as an unsafe call. */
		if (detail)
			*detail = "the program is capturing a graph";
		return -EBUSY;
	}
	struct chunk_graph *g = calloc(1, sizeof(*g));
	if (g) {
		g->nodes = calloc(n, sizeof(*g->nodes));
		g->kp = calloc(n, sizeof(*g->kp));
	}
	if (!g || !g->nodes || !g->kp) {
		if (g)
			graph_free(g);
		if (detail)
			*detail = "out of host memory";
		return -ENOMEM;
	}
	g->ctx = s->ctx;
	g->n = n;

	int in = cg_backend_enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
	if (r == CUDA_SUCCESS && !s->capture)
		r = CG_REAL(cuStreamCreate)(&s->capture, CU_STREAM_NON_BLOCKING);
	if (r == CUDA_SUCCESS)
		r = CG_REAL(cuStreamBeginCapture_v2)(s->capture, CU_STREAM_CAPTURE_MODE_RELAXED);
	bool capturing = r == CUDA_SUCCESS;
	for (uint32_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
		r = submit(&ops[i], s->capture);
		CUstreamCaptureStatus st;
		const CUgraphNode *deps = NULL;
		size_t ndeps = 0;
		if (r == CUDA_SUCCESS)
			r = CG_REAL(cuStreamGetCaptureInfo_v3)(s->capture, &st, NULL, NULL, &deps, NULL, &ndeps);
		if (r == CUDA_SUCCESS && (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || ndeps != 1))
			r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		if (r == CUDA_SUCCESS)
			g->nodes[i] = deps[0];
	}
	if (capturing) {
		CUresult e = CG_REAL(cuStreamEndCapture)(s->capture, &g->graph);
		if (r == CUDA_SUCCESS)
			r = e;
	}
	for (uint32_t i = 0; r == CUDA_SUCCESS && i < n; i++)
		if (cg_sig_kind(ops[i].sig) == CG_K_KERNEL)
			r = CG_REAL(cuGraphKernelNodeGetParams_v2)(g->nodes[i], &g->kp[i]);
	if (r == CUDA_SUCCESS)
		r = CG_REAL(cuGraphInstantiateWithFlags)(&g->exec, g->graph, 0);
	cg_backend_leave(in);
	if (r != CUDA_SUCCESS) {
		graph_free(g);
		return fail(r, detail);
	}
	*out = g;
	return 0;
}

static CUresult patch_kernel(struct chunk_graph *g, uint32_t index, const struct cg_op *op)
{
	const struct cg_layout *l = cg_sig_layout(op->sig);
	void *inline_params[INLINE_PARAMS];
	void **params = param_ptrs(op, inline_params);
	if (!params)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* The node as captured (function, context), with this launch's shape and parameters: the
	 * shape moves with the arguments (sig.h), the captured one may be another launch's. */
	struct cg_launch_shape sh = cg_op_shape(op->args);
	CUDA_KERNEL_NODE_PARAMS p = g->kp[index];
	p.gridDimX = sh.grid[0], p.gridDimY = sh.grid[1], p.gridDimZ = sh.grid[2];
	p.blockDimX = sh.block[0], p.blockDimY = sh.block[1], p.blockDimZ = sh.block[2];
	p.sharedMemBytes = sh.shmem;
	p.kernelParams = l->n ? params : NULL;
	p.extra = NULL;
	CUresult r = CG_REAL(cuGraphExecKernelNodeSetParams_v2)(g->exec, g->nodes[index], &p);
	if (params != inline_params)
		free(params);
	return r;
}

static CUresult patch_memop(struct chunk_graph *g, uint32_t index, const struct cg_op *op)
{
	struct cg_sig copy;
	const struct cg_sig *sig = cg_sig_read(&copy, op->sig, op->sig_len);
	if (sig->kind == CG_K_COPY) {
		CUDA_MEMCPY3D c = {
			.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = mem_arg(op, 1),
			.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = mem_arg(op, 0),
			.WidthInBytes = sig->b, .Height = 1, .Depth = 1,
		};
		return CG_REAL(cuGraphExecMemcpyNodeSetParams)(g->exec, g->nodes[index], &c, g->ctx);
	}
	CUDA_MEMSET_NODE_PARAMS m = {
		.dst = mem_arg(op, 0), .value = (unsigned)mem_arg(op, 1),
		.elementSize = sig->kind == CG_K_MEMSET8 ? 1 : 4, .width = sig->b, .height = 1,
	};
	return CG_REAL(cuGraphExecMemsetNodeSetParams)(g->exec, g->nodes[index], &m, g->ctx);
}

static int be_patch(void *be, void *graph, uint32_t index, const struct cg_op *op, const char **detail)
{
	struct chunk_graph *g = graph;
	if (index >= g->n)
		return -EINVAL;
	int in = cg_backend_enter(g->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT
	           : cg_sig_kind(op->sig) == CG_K_KERNEL ? patch_kernel(g, index, op)
	                                                 : patch_memop(g, index, op);
	cg_backend_leave(in);
	return r == CUDA_SUCCESS ? 0 : fail(r, detail);
}

static int be_launch(void *be, void *stream, void *graph, const char **detail)
{
	struct cg_sstate *s = stream;
	struct chunk_graph *g = graph;
	CUstream st;
	int in = cg_backend_enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : target(s, &st);
	if (r == CUDA_SUCCESS)
		r = CG_REAL(cuGraphLaunch)(g->exec, st);
	cg_backend_leave(in);
	return r == CUDA_SUCCESS ? 0 : fail(r, detail);
}

static void be_destroy(void *be, void *graph)
{
	struct chunk_graph *g = graph;
	int in = cg_backend_enter(ctx_dead(g->ctx) ? NULL : g->ctx);
	graph_free(g);
	cg_backend_leave(in);
}

/* --- GPU timing of chunk runs, for the cost gate ------------------------------------------ */
/* A sample is two events recorded on the program's stream around one run of a chunk. They are
 * never waited for: cuEventQuery at the stream's later boundaries and flushes and from the
 * flusher, and an eager and a graph sample of one chunk then go to the engine as a pair. An
 * event API failing stops all timing for good (a nicety must not cost the program anything);
 * with a program capture in progress nothing is recorded or queried (its global mode could
 * take our calls for unsafe ones). */
#define TIMING_SLOTS 16

struct timing_slot {
	CUevent ev[2];  /* begin, end: created on first use, kept for the stream's life */
	uint64_t key;
	bool graph;
};

struct cg_timing {
	struct timing_slot slot[TIMING_SLOTS]; /* a ring: one stream's events complete in order */
	uint32_t head, n;                      /* oldest sample in flight; samples in flight */
	struct { uint64_t key; double us; bool graph; } unpaired[TIMING_SLOTS]; /* read, waiting */
	uint32_t nunpaired;
};

static atomic_bool timing_off;
static atomic_int timing_in_flight; /* over all streams: the flusher's cheap check */

bool cg_backend_timing_due(void)
{
	return atomic_load_explicit(&timing_in_flight, memory_order_relaxed) > 0 &&
	       !atomic_load_explicit(&timing_off, memory_order_relaxed);
}

static void timing_failed(const char *api, CUresult r)
{
	static int once;
	atomic_store(&timing_off, true);
	const char *name = NULL;
	char text[160];
	fail(r, &name);
	snprintf(text, sizeof(text), "%s failed (%s): GPU timing of chunks for the cost gate is off",
	         api, name);
	cg_note_once(&once, text);
}

static bool timing_possible(struct cg_sstate *s)
{
	return !atomic_load_explicit(&timing_off, memory_order_relaxed) &&
	       atomic_load(&cg_shim.captures) == 0 && !ctx_dead(s->ctx);
}

static bool be_time_begin(void *be, void *stream, uint64_t key, bool graph)
{
	struct cg_sstate *s = stream;
	/* Samples are recorded on the program's stream: a per-thread one only by its own thread. */
	if (!timing_possible(s) || (s->per_thread && !cg_stream_mine(s)))
		return false;
	if (!cg_real[CG_E_cuEventElapsedTime_v2]) { /* a driver older than CUDA 12.8 */
		atomic_store(&timing_off, true);
		return false;
	}
	if (!s->timing && !(s->timing = calloc(1, sizeof(*s->timing))))
		return false;
	struct cg_timing *t = s->timing;
	if (t->n == TIMING_SLOTS)
		return false;  /* read at the next boundary or flusher round */
	struct timing_slot *sl = &t->slot[(t->head + t->n) % TIMING_SLOTS];
	int in = cg_backend_enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
	const char *api = "cuEventCreate";
	for (int i = 0; i < 2 && r == CUDA_SUCCESS; i++)
		if (!sl->ev[i])
			r = CG_REAL(cuEventCreate)(&sl->ev[i], CU_EVENT_DEFAULT);
	if (r == CUDA_SUCCESS) {
		api = "cuEventRecord";
		r = CG_REAL(cuEventRecord)(sl->ev[0], s->handle);
	}
	cg_backend_leave(in);
	if (in == CG_CTX_FAILED)
		return false;
	if (r != CUDA_SUCCESS) {
		timing_failed(api, r);
		return false;
	}
	sl->key = key;
	sl->graph = graph;
	t->n++;
	atomic_fetch_add(&timing_in_flight, 1);
	return true;
}

static void be_time_end(void *be, void *stream, bool ok)
{
	struct cg_sstate *s = stream;
	struct cg_timing *t = s->timing;
	struct timing_slot *sl = &t->slot[(t->head + t->n - 1) % TIMING_SLOTS];
	if (ok && timing_possible(s)) {
		int in = cg_backend_enter(s->ctx);
		CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT
		           : CG_REAL(cuEventRecord)(sl->ev[1], s->handle);
		cg_backend_leave(in);
		if (r == CUDA_SUCCESS)
			return;
		if (in != CG_CTX_FAILED)
			timing_failed("cuEventRecord", r);
	}
	t->n--;  /* the newest sample: dropped */
	atomic_fetch_sub(&timing_in_flight, 1);
}

/* One sample read: paired with the other kind's sample of its chunk, if one is waiting. */
static void timing_pair(struct cg_sstate *s, uint64_t key, bool graph, double us)
{
	struct cg_timing *t = s->timing;
	for (uint32_t i = 0; i < t->nunpaired; i++) {
		if (t->unpaired[i].key != key || t->unpaired[i].graph == graph)
			continue;
		double other = t->unpaired[i].us;
		t->unpaired[i] = t->unpaired[--t->nunpaired];
		cg_stream_timing(s->eng, key, graph ? other : us, graph ? us : other);
		return;
	}
	if (t->nunpaired == TIMING_SLOTS)  /* partners that never came (chunk gone): forget one */
		t->unpaired[0] = t->unpaired[--t->nunpaired];
	t->unpaired[t->nunpaired++] = (__typeof__(t->unpaired[0])){ key, us, graph };
}

void cg_backend_read_timing(struct cg_sstate *s)
{
	struct cg_timing *t = s->timing;
	if (!t || !t->n || !s->eng || !timing_possible(s))
		return;
	int in = cg_backend_enter(s->ctx);
	while (in != CG_CTX_FAILED && t->n) {
		struct timing_slot *sl = &t->slot[t->head];
		/* The end event complete means the begin event is too: same stream, recorded first. */
		CUresult r = CG_REAL(cuEventQuery)(sl->ev[1]);
		if (r == CUDA_ERROR_NOT_READY)
			break;
		const char *api = "cuEventQuery";
		float ms = 0;
		if (r == CUDA_SUCCESS) {
			api = "cuEventElapsedTime";
			r = CG_REAL(cuEventElapsedTime_v2)(&ms, sl->ev[0], sl->ev[1]);
		}
		t->head = (t->head + 1) % TIMING_SLOTS;
		t->n--;
		atomic_fetch_sub(&timing_in_flight, 1);
		if (r != CUDA_SUCCESS) {
			timing_failed(api, r);
			break;
		}
		timing_pair(s, sl->key, sl->graph, (double)ms * 1000.0);
	}
	cg_backend_leave(in);
}

static void timing_free(struct cg_sstate *s)
{
	struct cg_timing *t = s->timing;
	if (!t)
		return;
	if (!ctx_dead(s->ctx)) {
		int in = cg_backend_enter(s->ctx);
		for (int i = 0; in != CG_CTX_FAILED && i < TIMING_SLOTS; i++)
			for (int j = 0; j < 2; j++)
				if (t->slot[i].ev[j])
					CG_REAL(cuEventDestroy_v2)(t->slot[i].ev[j]);
		cg_backend_leave(in);
	}
	atomic_fetch_sub(&timing_in_flight, (int)t->n);
	free(t);
	s->timing = NULL;
}

void cg_backend_forget_stream(struct cg_sstate *s)
{
	timing_free(s);
	if (s->capture && !ctx_dead(s->ctx)) {
		int in = cg_backend_enter(s->ctx);
		CG_REAL(cuStreamDestroy_v2)(s->capture);
		cg_backend_leave(in);
	}
	s->capture = NULL;
	if (s->per_thread)
		cg_ptds_close(s);
}

const struct cg_backend cg_cuda_backend = {
	.eager = be_eager,
	.build = be_build,
	.patch = be_patch,
	.launch = be_launch,
	.destroy = be_destroy,
	.event = cg_events_engine,
	.time_begin = be_time_begin,
	.time_end = be_time_end,
};
