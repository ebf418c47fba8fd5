/* Real-driver backend (cuda_backend.h). Chunk graphs are made by capturing the recorded ops on a
 * private stream: the driver then encodes every launch form (CUkernel handles, attributes such as
 * clusters or programmatic serialisation, memsets, copies) exactly as an eager launch would, and
 * cuStreamGetCaptureInfo names the node each op became, which is what patching needs. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "shim/context/context.h"
#include "shim/loader/driver.h"
#include "events.h"
#include "nvtx.h"
#include "ptds.h"
#include "shim/base/report.h"
#include "shim/base/shim.h"
#include "shim/base/sig.h"
#include "shim/context/sstate.h"
#include "timing.h"

struct chunk_graph {
	CUgraph graph;
	CUgraphExec exec;
	CUcontext ctx;
	uint32_t n;
	CUgraphNode *nodes;
	CUDA_KERNEL_NODE_PARAMS *kp; /* kernel nodes' parameters as captured (function, context;
	                                shape and parameters are each patch's own) */
	size_t mem;                  /* device memory its instantiation took (free memory before
	                                less after: an estimate, other allocations may interleave) */
	uint64_t content;            /* with CUGRAFT_NVTX: names its replays (nvtx.h) */
	uint32_t patched;            /* with CUGRAFT_NVTX: nodes patched since its last launch */
};

/* Device memory the instantiated graphs hold now, and at most (cg_backend_graph_memory). */
static _Atomic uint64_t graph_mem, graph_mem_peak;
/* Host time in the graph API (cg_backend_host_time): building graphs (capture and
 * instantiation, failed builds included), patching nodes, launching graphs; and in submitting
 * deferred or held ops eagerly, and those ops. */
static _Atomic uint64_t build_ns, patch_ns, launch_ns, flush_ns, flush_ops;

static int fail(CUresult r, const char **detail)
{
	if (detail)
		*detail = cg_driver_error_name(r);
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
	return cg_memop_arg(op->args, i);
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
		return CG_REAL(cuMemsetD8Async)(mem_arg(op, 0), (unsigned char)mem_arg(op, 1), mem_arg(op, 2), st);
	case CG_K_MEMSET32:
		return CG_REAL(cuMemsetD32Async)(mem_arg(op, 0), (unsigned int)mem_arg(op, 1), mem_arg(op, 2), st);
	case CG_K_COPY:
		return CG_REAL(cuMemcpyDtoDAsync_v2)(mem_arg(op, 0), mem_arg(op, 1), mem_arg(op, 2), st);
	}
	return CUDA_ERROR_INVALID_VALUE;
}

/* Where this thread submits the stream's work (a per-thread stream: ptds.h). Context entered. */
static CUresult target(struct cg_sstate *s, CUstream *st)
{
	*st = s->per_thread ? cg_ptds_target(s) : s->handle;
	return *st ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Every op submitted here was deferred or held: the program was told it was submitted. Its
 * failure goes to the next synchronising call (shim.h), as an asynchronous error would. */
static void deferred_failed(CUresult r)
{
	static int said;
	int none = 0;
	atomic_compare_exchange_strong(&cg_shim.deferred_error, &none, (int)r);
	cg_note_once(&said, "deferred work failed when it was submitted eagerly: its error is "
	             "returned by the program's next synchronising call (sync or stream query)");
}

/* Adds the host time since t0 to one of the sums, and to this thread's `mine` (hooktime.h: what
 * of a timed launch call the replays, or the deferred ops submitted eagerly, took). */
static void host_time(_Atomic uint64_t *sum, uint64_t *mine, uint64_t t0)
{
	uint64_t ns = cg_monotonic_ns() - t0;
	atomic_fetch_add(sum, ns);
	*mine += ns;
}

static void replay_time(_Atomic uint64_t *sum, uint64_t t0)
{
	host_time(sum, &cg_tls.hooktime.replay_ns, t0);
}

static int be_eager(void *be, void *stream, const struct cg_op *op, const char **detail)
{
	struct cg_sstate *s = stream;
	CUstream st;
	uint64_t t0 = cg_monotonic_ns();
	int in = cg_backend_enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : target(s, &st);
	if (r == CUDA_SUCCESS)
		r = submit(op, st);
	cg_backend_leave(in);
	host_time(&flush_ns, &cg_tls.hooktime.flush_ns, t0);
	atomic_fetch_add(&flush_ops, 1);
	cg_tls.hooktime.flush_ops++;
	cg_tls.hooktime.submits++;
	if (r != CUDA_SUCCESS)
		deferred_failed(r);
	if (cg_nvtx_on())
		cg_nvtx_eager(1);
	return r == CUDA_SUCCESS ? 0 : fail(r, detail);
}

/* --- chunk graphs -------------------------------------------------------------------------- */
static size_t free_memory(void)
{
	size_t free = 0, total = 0;
	if (!CG_REAL(cuMemGetInfo_v2) || CG_REAL(cuMemGetInfo_v2)(&free, &total) != CUDA_SUCCESS)
		return 0;
	return free;
}

static void graph_mem_add(struct chunk_graph *g, size_t before)
{
	size_t after = free_memory();
	g->mem = before > after && after ? before - after : 0;
	uint64_t now = atomic_fetch_add(&graph_mem, g->mem) + g->mem;
	uint64_t peak = atomic_load(&graph_mem_peak);
	while (now > peak && !atomic_compare_exchange_weak(&graph_mem_peak, &peak, now)) {}
}

void cg_backend_graph_memory(uint64_t *now, uint64_t *peak)
{
	*now = atomic_load(&graph_mem);
	*peak = atomic_load(&graph_mem_peak);
}

void cg_backend_host_time(struct cg_backend_host_time *out)
{
	*out = (struct cg_backend_host_time){ atomic_load(&build_ns), atomic_load(&patch_ns),
	                                      atomic_load(&launch_ns), atomic_load(&flush_ns),
	                                      atomic_load(&flush_ops) };
}

static void graph_free(struct chunk_graph *g)
{
	atomic_fetch_sub(&graph_mem, g->mem);
	if (!cg_ctx_dead(g->ctx)) {
		if (g->exec)
			CG_REAL(cuGraphExecDestroy)(g->exec);
		if (g->graph)
			CG_REAL(cuGraphDestroy)(g->graph);
	}
	free(g->nodes);
	free(g->kp);
	free(g);
}

/* A chunk graph of n nodes, not built yet; NULL when out of host memory. */
static struct chunk_graph *graph_new(CUcontext ctx, uint32_t n, uint64_t content)
{
	struct chunk_graph *g = calloc(1, sizeof(*g));
	if (g) {
		g->nodes = calloc(n, sizeof(*g->nodes));
		g->kp = calloc(n, sizeof(*g->kp));
	}
	if (!g || !g->nodes || !g->kp) {
		if (g)
			graph_free(g);
		return NULL;
	}
	g->ctx = ctx;
	g->n = n;
	g->content = content;
	return g;
}

/* The ops captured on the stream's private capture stream into g->graph, one node each
 * (g->nodes). Context entered. */
static CUresult capture_chunk(struct cg_sstate *s, struct chunk_graph *g, const struct cg_op *ops,
                              uint32_t n)
{
	CUresult r = CUDA_SUCCESS;
	if (!s->capture)
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
	return r;
}

/* The captured graph's kernel nodes read (their parameters are patched later), then the graph
 * instantiated and the device memory it took counted. Context entered. */
static CUresult instantiate_chunk(struct chunk_graph *g, const struct cg_op *ops, uint32_t n)
{
	CUresult r = CUDA_SUCCESS;
	for (uint32_t i = 0; r == CUDA_SUCCESS && i < n; i++)
		if (cg_sig_kind(ops[i].sig) == CG_K_KERNEL)
			r = CG_REAL(cuGraphKernelNodeGetParams_v2)(g->nodes[i], &g->kp[i]);
	size_t before = r == CUDA_SUCCESS ? free_memory() : 0;
	if (r == CUDA_SUCCESS)
		r = CG_REAL(cuGraphInstantiateWithFlags)(&g->exec, g->graph, 0);
	if (r == CUDA_SUCCESS && before)
		graph_mem_add(g, before);
	return r;
}

static int build(void *stream, const struct cg_op *ops, uint32_t n, void **out,
                 const char **detail, uint64_t content)
{
	struct cg_sstate *s = stream;
	if (atomic_load(&cg_shim.captures) > 0) {
		/* A global-mode capture of the program's would see ours as an unsafe call. */
		if (detail)
			*detail = "the program is capturing a graph";
		return -EBUSY;
	}
	struct chunk_graph *g = graph_new(s->ctx, n, content);
	if (!g) {
		if (detail)
			*detail = "out of host memory";
		return -ENOMEM;
	}
	uint64_t t0 = cg_monotonic_ns();
	int in = cg_backend_enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : capture_chunk(s, g, ops, n);
	if (r == CUDA_SUCCESS)
		r = instantiate_chunk(g, ops, n);
	cg_backend_leave(in);
	replay_time(&build_ns, t0);
	if (r != CUDA_SUCCESS) {
		graph_free(g);
		return fail(r, detail);
	}
	*out = g;
	return 0;
}

static int be_build(void *be, void *stream, const struct cg_op *ops, uint32_t n, void **out,
                    const char **detail)
{
	if (!cg_nvtx_on())
		return build(stream, ops, n, out, detail, 0);
	uint64_t content = cg_nvtx_build_begin(ops, n);
	int r = build(stream, ops, n, out, detail, content);
	cg_nvtx_build_end();
	return r;
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
			.WidthInBytes = mem_arg(op, 2), .Height = 1, .Depth = 1,
		};
		return CG_REAL(cuGraphExecMemcpyNodeSetParams)(g->exec, g->nodes[index], &c, g->ctx);
	}
	CUDA_MEMSET_NODE_PARAMS m = {
		.dst = mem_arg(op, 0), .value = (unsigned)mem_arg(op, 1),
		.elementSize = sig->kind == CG_K_MEMSET8 ? 1 : 4, .width = mem_arg(op, 2), .height = 1,
	};
	return CG_REAL(cuGraphExecMemsetNodeSetParams)(g->exec, g->nodes[index], &m, g->ctx);
}

static int be_patch(void *be, void *graph, uint32_t index, const struct cg_op *op, const char **detail)
{
	struct chunk_graph *g = graph;
	if (index >= g->n)
		return -EINVAL;
	uint64_t t0 = cg_monotonic_ns();
	int in = cg_backend_enter(g->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT
	           : cg_sig_kind(op->sig) == CG_K_KERNEL ? patch_kernel(g, index, op)
	                                                 : patch_memop(g, index, op);
	cg_backend_leave(in);
	replay_time(&patch_ns, t0);
	if (r == CUDA_SUCCESS && cg_nvtx_on())
		g->patched++;
	return r == CUDA_SUCCESS ? 0 : fail(r, detail);
}

static int be_launch(void *be, void *stream, void *graph, const char **detail)
{
	struct cg_sstate *s = stream;
	struct chunk_graph *g = graph;
	CUstream st;
	uint64_t t0 = cg_monotonic_ns();
	int in = cg_backend_enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : target(s, &st);
	bool mark = cg_nvtx_on();
	if (mark) {
		cg_nvtx_replay_begin(g->content, g->n, g->patched);
		g->patched = 0;
	}
	if (r == CUDA_SUCCESS)
		r = CG_REAL(cuGraphLaunch)(g->exec, st);
	if (mark)
		cg_nvtx_replay_end();
	cg_backend_leave(in);
	replay_time(&launch_ns, t0);
	cg_tls.hooktime.submits++;
	return r == CUDA_SUCCESS ? 0 : fail(r, detail);
}

static void be_destroy(void *be, void *graph)
{
	struct chunk_graph *g = graph;
	int in = cg_backend_enter(cg_ctx_dead(g->ctx) ? NULL : g->ctx);
	graph_free(g);
	cg_backend_leave(in);
}

void cg_backend_forget_stream(struct cg_sstate *s)
{
	cg_timing_free(s);
	if (s->capture && !cg_ctx_dead(s->ctx)) {
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
	.time_begin = cg_timing_begin,
	.time_end = cg_timing_end,
};
