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

/* An executable graph, and the chunk graphs that run on it: one, or several of one stream (see
 * "shared executables" below). */
struct cg_exec {
	CUgraph graph;               /* what it was instantiated from: its nodes are the ones patched */
	CUgraphExec exec;
	CUgraphNode *nodes;
	CUcontext ctx;
	uint32_t n, refs;            /* chunk graphs that run on it */
	struct chunk_graph *holder;  /* whose nodes it holds now (NULL: none alive) */
	size_t mem;                  /* device memory its instantiation took (free memory before
	                                less after: an estimate, other allocations may interleave) */
	struct cg_sstate *pool;      /* the stream whose chunks may share it, or NULL */
	struct cg_exec *next;        /* in pool->execs */
	uint32_t skel_len;
	unsigned char skel[];        /* its nodes' launch attributes (skeleton()) */
};

struct chunk_graph {
	struct cg_exec *x;           /* the executable it runs on */
	CUgraph graph;               /* its own capture while x is another's (NULL once x is its own) */
	CUgraphNode *nodes;          /* the capture's nodes */
	CUcontext ctx;
	uint32_t n;
	CUDA_KERNEL_NODE_PARAMS *kp; /* kernel nodes' parameters as captured (function, context;
	                                shape and parameters are each patch's own) */
	unsigned char *last;         /* on a shared executable: the arguments last patched in, per
	                                node (at last_off[i]), to tell a switch's patches that only
	                                the switch needed */
	uint32_t *last_off;
	bool switching;              /* the patches before this launch follow a switch */
	uint32_t rent;               /* patches its switches needed and its arguments did not */
	uint64_t content;            /* with CUGRAFT_NVTX: names its replays (nvtx.h) */
	uint32_t patched;            /* with CUGRAFT_NVTX: nodes patched since its last launch */
};

/* Device memory the instantiated graphs hold now, and at most (cg_backend_graph_memory). */
static _Atomic uint64_t graph_mem, graph_mem_peak;
/* Host time in the graph API (cg_backend_host_time): building graphs (capture and
 * instantiation, failed builds included), patching nodes, launching graphs; and in submitting
 * deferred or held ops eagerly, and those ops. */
static _Atomic uint64_t build_ns, patch_ns, launch_ns, flush_ns, flush_ops;
static _Atomic uint64_t capture_ns;  /* of build_ns: capturing the ops, reading their nodes */
/* Executables instantiated; graphs built onto another chunk's executable; launches that switched
 * an executable over to another graph; graphs that got an executable of their own later
 * (cg_backend_execs). */
static _Atomic uint64_t execs_made, graphs_joined, exec_switches, execs_bought;

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

/* --- what the graphs cost ------------------------------------------------------------------ */
static size_t free_memory(void)
{
	size_t free = 0, total = 0;
	if (!CG_REAL(cuMemGetInfo_v2) || CG_REAL(cuMemGetInfo_v2)(&free, &total) != CUDA_SUCCESS)
		return 0;
	return free;
}

static void graph_mem_add(struct cg_exec *x, size_t before)
{
	size_t after = free_memory();
	x->mem = before > after && after ? before - after : 0;
	uint64_t now = atomic_fetch_add(&graph_mem, x->mem) + x->mem;
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
	                                      atomic_load(&flush_ops), atomic_load(&capture_ns) };
}

/* --- shared executables --------------------------------------------------------------------
 * A chunk whose arguments change at most of its ops every run (a decoding step's shapes and
 * pointers as its sequence grows) has nearly every node patched at each launch anyway. Its
 * graph (built with `share`) may then run on the executable of another chunk of the same stream
 * with the same skeleton (as many nodes, every one a kernel, with the same launch attributes):
 * another GEMM cuBLAS picks at some lengths, a branch some steps take. When the executable
 * last ran another graph, every node is patched (claim), the function too
 * (cuGraphExecKernelNodeSetParams changes it within a context), so a new variant costs a
 * capture, not an instantiation. A launch on the executable's own stream is ordered behind its
 * last one anyway: sharing adds no dependency. Rent, then buy: once the patches its switches
 * needed and its own arguments did not add up to an instantiation's cost (EXEC_RENT), a graph
 * gets an executable of its own from its capture; so sharing costs at most about twice the
 * instantiation it saves, and chunks that run by turns in every step stop sharing soon. */

/* Node patches worth one instantiation: a build took 133-215 us on an H100 (10-node chunks of
 * greedy decoding), a kernel node's patch 0.66-0.75 us. */
#define EXEC_RENT 256

static void exec_free(struct cg_exec *x)
{
	atomic_fetch_sub(&graph_mem, x->mem);
	if (!cg_ctx_dead(x->ctx)) {
		if (x->exec)
			CG_REAL(cuGraphExecDestroy)(x->exec);
		if (x->graph)
			CG_REAL(cuGraphDestroy)(x->graph);
	}
	free(x->nodes);
	free(x);
}

/* g no longer runs on x; the last graph to leave frees it. */
static void exec_leave(struct cg_exec *x, struct chunk_graph *g)
{
	if (x->holder == g)
		x->holder = NULL;
	if (--x->refs)
		return;
	if (x->pool) {
		struct cg_exec **p = &x->pool->execs;
		while (*p != x)
			p = &(*p)->next;
		*p = x->next;
	}
	exec_free(x);
}

/* The most bytes a node adds to a skeleton. */
#define SKEL_NODE_MAX (sizeof(uint32_t) + CG_MAX_ATTRS * sizeof(CUlaunchAttribute))

/* The skeleton of ops[0..n) into out (room for n * SKEL_NODE_MAX bytes): each node's launch
 * attributes; its length. 0: the ops cannot share (a memop's new width may be refused by an
 * executable's update). */
static uint32_t skeleton(const struct cg_op *ops, uint32_t n, unsigned char *out)
{
	uint32_t len = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct cg_sig copy;
		const struct cg_sig *sig = cg_sig_read(&copy, ops[i].sig, ops[i].sig_len);
		if (sig->kind != CG_K_KERNEL)
			return 0;
		uint32_t attrs = sig->nattrs * (uint32_t)sizeof(CUlaunchAttribute);
		memcpy(out + len, &sig->nattrs, sizeof(sig->nattrs));
		memcpy(out + len + sizeof(sig->nattrs), sig->attrs, attrs);
		len += (uint32_t)sizeof(sig->nattrs) + attrs;
	}
	return len;
}

/* g's capture instantiated as its own executable, offered to `pool`'s other chunks when not
 * NULL (with its skeleton, skel_len bytes). Context entered. */
static CUresult exec_own(struct chunk_graph *g, struct cg_sstate *pool, const unsigned char *skel,
                         uint32_t skel_len)
{
	struct cg_exec *x = calloc(1, sizeof(*x) + (pool ? skel_len : 0));
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t before = free_memory();
	CUresult r = CG_REAL(cuGraphInstantiateWithFlags)(&x->exec, g->graph, 0);
	if (r != CUDA_SUCCESS) {
		free(x);
		return r;
	}
	if (before)
		graph_mem_add(x, before);
	atomic_fetch_add(&execs_made, 1);
	x->graph = g->graph, x->nodes = g->nodes, x->ctx = g->ctx, x->n = g->n;
	g->graph = NULL, g->nodes = NULL;
	x->refs = 1;
	x->holder = g;
	if (pool) {
		memcpy(x->skel, skel, skel_len);
		x->skel_len = skel_len;
		x->pool = pool;
		x->next = pool->execs;
		pool->execs = x;
	}
	g->x = x;
	return CUDA_SUCCESS;
}

/* g runs on an executable of the stream's with ops' skeleton (skel, skel_len bytes), keeping
 * its capture and the arguments it was captured with. false: none, or out of host memory. */
static bool exec_join(struct chunk_graph *g, struct cg_sstate *s, const struct cg_op *ops,
                      const unsigned char *skel, uint32_t skel_len)
{
	struct cg_exec *x = s->execs;
	while (x && (x->n != g->n || x->skel_len != skel_len || memcmp(x->skel, skel, skel_len)))
		x = x->next;
	if (!x)
		return false;
	g->last_off = malloc((g->n + 1) * sizeof(*g->last_off));
	uint32_t bytes = 0;
	for (uint32_t i = 0; g->last_off && i < g->n; i++) {
		g->last_off[i] = bytes;
		bytes += ops[i].args_len;
	}
	g->last = g->last_off ? malloc(bytes ? bytes : 1) : NULL;
	if (!g->last)
		return false;
	g->last_off[g->n] = bytes;
	for (uint32_t i = 0; i < g->n; i++)
		memcpy(g->last + g->last_off[i], ops[i].args, ops[i].args_len);
	g->x = x;
	x->refs++;
	atomic_fetch_add(&graphs_joined, 1);
	return true;
}

/* --- chunk graphs -------------------------------------------------------------------------- */
static void graph_free(struct chunk_graph *g)
{
	if (g->x)
		exec_leave(g->x, g);
	if (g->graph && !cg_ctx_dead(g->ctx))
		CG_REAL(cuGraphDestroy)(g->graph);
	free(g->nodes);
	free(g->kp);
	free(g->last);
	free(g->last_off);
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
 * (g->nodes), and the kernel nodes' parameters read (their arguments are patched later).
 * Context entered. */
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
	for (uint32_t i = 0; r == CUDA_SUCCESS && i < n; i++)
		if (cg_sig_kind(ops[i].sig) == CG_K_KERNEL)
			r = CG_REAL(cuGraphKernelNodeGetParams_v2)(g->nodes[i], &g->kp[i]);
	return r;
}

/* The captured graph onto an executable: another chunk's where `share` allows and the stream
 * has one that fits, else its own (offered to the others when `share`). Context entered. */
static CUresult place_chunk(struct cg_sstate *s, struct chunk_graph *g, const struct cg_op *ops,
                            bool share)
{
	unsigned char *skel = share ? malloc(g->n * SKEL_NODE_MAX) : NULL;
	uint32_t len = skel ? skeleton(ops, g->n, skel) : 0;
	CUresult r = len && exec_join(g, s, ops, skel, len) ? CUDA_SUCCESS
	           : exec_own(g, len ? s : NULL, skel, len);
	free(skel);
	return r;
}

static int build(void *stream, const struct cg_op *ops, uint32_t n, bool share, void **out,
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
	cg_tls.build.capture_ns = cg_monotonic_ns() - t0;
	atomic_fetch_add(&capture_ns, cg_tls.build.capture_ns);
	if (r == CUDA_SUCCESS)
		r = place_chunk(s, g, ops, share);
	cg_backend_leave(in);
	cg_tls.build.ns = cg_monotonic_ns() - t0;
	replay_time(&build_ns, t0);
	if (r != CUDA_SUCCESS) {
		graph_free(g);
		return fail(r, detail);
	}
	*out = g;
	return 0;
}

static int be_build(void *be, void *stream, const struct cg_op *ops, uint32_t n, bool share,
                    void **out, const char **detail)
{
	if (!cg_nvtx_on())
		return build(stream, ops, n, share, out, detail, 0);
	uint64_t content = cg_nvtx_build_begin(ops, n);
	int r = build(stream, ops, n, share, out, detail, content);
	cg_nvtx_build_end();
	return r;
}

/* Before the patches and the launch of g: 0 when its executable holds what was last patched
 * into g, 1 when it holds another graph's nodes (every node is to be patched). A graph whose
 * rent is paid gets its own executable here, holding its capture's arguments (1 too). */
static int be_claim(void *be, void *graph, const char **detail)
{
	struct chunk_graph *g = graph;
	struct cg_exec *x = g->x;
	if (x->holder == g)
		return 0;
	if (g->graph && g->rent >= EXEC_RENT) {
		uint64_t t0 = cg_monotonic_ns();
		int in = cg_backend_enter(g->ctx);
		CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : exec_own(g, NULL, NULL, 0);
		cg_backend_leave(in);
		replay_time(&build_ns, t0);
		if (r == CUDA_SUCCESS) {
			exec_leave(x, g);
			atomic_fetch_add(&execs_bought, 1);
			g->switching = false;
			return 1;  /* exec_own made g the holder */
		}
		g->rent = 0;  /* out of device memory, say: share on, and try again after as long */
	}
	g->switching = x->holder != NULL;
	if (g->switching)
		atomic_fetch_add(&exec_switches, 1);
	x->holder = g;
	return 1;
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
	CUresult r = CG_REAL(cuGraphExecKernelNodeSetParams_v2)(g->x->exec, g->x->nodes[index], &p);
	if (params != inline_params)
		free(params);
	return r;
}

static CUresult patch_memop(struct chunk_graph *g, uint32_t index, const struct cg_op *op)
{
	struct cg_sig copy;
	const struct cg_sig *sig = cg_sig_read(&copy, op->sig, op->sig_len);
	CUgraphExec exec = g->x->exec;
	CUgraphNode node = g->x->nodes[index];
	if (sig->kind == CG_K_COPY) {
		CUDA_MEMCPY3D c = {
			.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = mem_arg(op, 1),
			.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = mem_arg(op, 0),
			.WidthInBytes = mem_arg(op, 2), .Height = 1, .Depth = 1,
		};
		return CG_REAL(cuGraphExecMemcpyNodeSetParams)(exec, node, &c, g->ctx);
	}
	CUDA_MEMSET_NODE_PARAMS m = {
		.dst = mem_arg(op, 0), .value = (unsigned)mem_arg(op, 1),
		.elementSize = sig->kind == CG_K_MEMSET8 ? 1 : 4, .width = mem_arg(op, 2), .height = 1,
	};
	return CG_REAL(cuGraphExecMemsetNodeSetParams)(exec, node, &m, g->ctx);
}

/* A graph on a shared executable remembers what it patched in: a patch after a switch whose
 * arguments equal the last ones is rent. */
static void note_patch(struct chunk_graph *g, uint32_t index, const struct cg_op *op)
{
	unsigned char *last = g->last + g->last_off[index];
	uint32_t len = g->last_off[index + 1] - g->last_off[index];
	if (len != op->args_len)
		return;  /* the policy patches with the arguments it built with: never */
	if (g->switching && memcmp(last, op->args, len) == 0)
		g->rent++;
	memcpy(last, op->args, len);
}

static int be_patch(void *be, void *graph, uint32_t index, const struct cg_op *op, const char **detail)
{
	struct chunk_graph *g = graph;
	if (index >= g->n)
		return -EINVAL;
	if (g->x->holder != g) {  /* not claimed: the executable holds another graph's nodes */
		if (detail)
			*detail = "graph not claimed before its patch";
		return -ESTALE;
	}
	uint64_t t0 = cg_monotonic_ns();
	int in = cg_backend_enter(g->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT
	           : cg_sig_kind(op->sig) == CG_K_KERNEL ? patch_kernel(g, index, op)
	                                                 : patch_memop(g, index, op);
	cg_backend_leave(in);
	replay_time(&patch_ns, t0);
	if (r == CUDA_SUCCESS && g->last)
		note_patch(g, index, op);
	if (r == CUDA_SUCCESS && cg_nvtx_on())
		g->patched++;
	return r == CUDA_SUCCESS ? 0 : fail(r, detail);
}

static int be_launch(void *be, void *stream, void *graph, const char **detail)
{
	struct cg_sstate *s = stream;
	struct chunk_graph *g = graph;
	if (g->x->holder != g) {
		if (detail)
			*detail = "graph not claimed before its launch";
		return -ESTALE;
	}
	g->switching = false;
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
		r = CG_REAL(cuGraphLaunch)(g->x->exec, st);
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

void cg_backend_execs(struct cg_backend_execs *out)
{
	*out = (struct cg_backend_execs){ atomic_load(&execs_made), atomic_load(&graphs_joined),
	                                  atomic_load(&exec_switches), atomic_load(&execs_bought) };
}

void cg_backend_forget_stream(struct cg_sstate *s)
{
	cg_timing_free(s);
	/* its graphs are gone with its engine; any executable left is no longer offered */
	for (struct cg_exec *x = s->execs; x; x = x->next)
		x->pool = NULL;
	s->execs = NULL;
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
	.claim = be_claim,
	.patch = be_patch,
	.launch = be_launch,
	.destroy = be_destroy,
	.event = cg_events_engine,
	.time_begin = cg_timing_begin,
	.time_end = cg_timing_end,
};
