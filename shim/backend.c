/* Real-driver backend (backend.h). Chunk graphs are made by capturing the recorded ops on a
 * private stream: the driver then encodes every launch form (CUkernel handles, attributes such as
 * clusters or programmatic serialisation, memsets, copies) exactly as an eager launch would, and
 * cuStreamGetCaptureInfo names the node each op became, which is what patching needs. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
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
	CUDA_KERNEL_NODE_PARAMS *kp; /* kernel nodes' parameters as captured */
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
static int enter(CUcontext ctx)
{
	cg_tl_internal++;
	cg_tl_forwarding++;
	return cg_ctx_enter(ctx);
}

static void leave(int entered)
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

/* kernelParams for a kernel op: pointers into its packed argument bytes at the layout's
 * offsets; in `inline_buf` (INLINE_PARAMS entries) when they fit, else malloc'd (free when
 * different from inline_buf); NULL when out of memory. */
static void **param_ptrs(const struct cg_op *op, void **inline_buf)
{
	const struct cg_layout *l = ((const struct cg_sig *)op->sig)->layout;
	void **params = l->n <= INLINE_PARAMS ? inline_buf : malloc(l->n * sizeof(void *));
	for (uint32_t i = 0; params && i < l->n; i++)
		params[i] = (char *)op->args + l->p[i].off;
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
	const struct cg_sig *sig = op->sig;
	switch (sig->kind) {
	case CG_K_KERNEL: {
		const struct cg_layout *l = sig->layout;
		void *inline_params[INLINE_PARAMS];
		void **params = param_ptrs(op, inline_params);
		if (!params)
			return CUDA_ERROR_OUT_OF_MEMORY;
		CUlaunchConfig c = {
			.gridDimX = sig->grid[0], .gridDimY = sig->grid[1], .gridDimZ = sig->grid[2],
			.blockDimX = sig->block[0], .blockDimY = sig->block[1], .blockDimZ = sig->block[2],
			.sharedMemBytes = sig->shmem, .hStream = st,
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

static int be_eager(void *be, void *stream, const struct cg_op *op, const char **detail)
{
	struct cg_sstate *s = stream;
	int in = enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : submit(op, s->handle);
	leave(in);
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

	int in = enter(s->ctx);
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
		if (((const struct cg_sig *)ops[i].sig)->kind == CG_K_KERNEL)
			r = CG_REAL(cuGraphKernelNodeGetParams_v2)(g->nodes[i], &g->kp[i]);
	if (r == CUDA_SUCCESS)
		r = CG_REAL(cuGraphInstantiateWithFlags)(&g->exec, g->graph, 0);
	leave(in);
	if (r != CUDA_SUCCESS) {
		graph_free(g);
		return fail(r, detail);
	}
	*out = g;
	return 0;
}

static CUresult patch_kernel(struct chunk_graph *g, uint32_t index, const struct cg_op *op)
{
	const struct cg_layout *l = ((const struct cg_sig *)op->sig)->layout;
	void *inline_params[INLINE_PARAMS];
	void **params = param_ptrs(op, inline_params);
	if (!params)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUDA_KERNEL_NODE_PARAMS p = g->kp[index];
	p.kernelParams = l->n ? params : NULL;
	p.extra = NULL;
	CUresult r = CG_REAL(cuGraphExecKernelNodeSetParams_v2)(g->exec, g->nodes[index], &p);
	if (params != inline_params)
		free(params);
	return r;
}

static CUresult patch_memop(struct chunk_graph *g, uint32_t index, const struct cg_op *op)
{
	const struct cg_sig *sig = op->sig;
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
	int in = enter(g->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT
	           : ((const struct cg_sig *)op->sig)->kind == CG_K_KERNEL ? patch_kernel(g, index, op)
	                                                                   : patch_memop(g, index, op);
	leave(in);
	return r == CUDA_SUCCESS ? 0 : fail(r, detail);
}

static int be_launch(void *be, void *stream, void *graph, const char **detail)
{
	struct cg_sstate *s = stream;
	struct chunk_graph *g = graph;
	int in = enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : CG_REAL(cuGraphLaunch)(g->exec, s->handle);
	leave(in);
	return r == CUDA_SUCCESS ? 0 : fail(r, detail);
}

static void be_destroy(void *be, void *graph)
{
	struct chunk_graph *g = graph;
	int in = enter(ctx_dead(g->ctx) ? NULL : g->ctx);
	graph_free(g);
	leave(in);
}

void cg_backend_forget_stream(struct cg_sstate *s)
{
	if (s->capture && !ctx_dead(s->ctx)) {
		int in = enter(s->ctx);
		CG_REAL(cuStreamDestroy_v2)(s->capture);
		leave(in);
	}
	s->capture = NULL;
}

const struct cg_backend cg_cuda_backend = {
	.eager = be_eager,
	.build = be_build,
	.patch = be_patch,
	.launch = be_launch,
	.destroy = be_destroy,
	.event = cg_events_engine,
};
