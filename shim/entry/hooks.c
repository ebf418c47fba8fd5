/* Hand-written hooks that change more than "flush, then forward": the program's own captures
 * and graphs (weighed by what they run in profile mode), lifetimes (stream, context, module),
 * and attribute changes that are mostly repeats. */
#include <pthread.h>
#include <stdlib.h>

#include "shim/context/context.h"
#include "shim/loader/counts.h"
#include "shim/loader/driver.h"
#include "shim/observers/floor.h"
#include "shim/base/image.h"
#include "shim/backend/layout.h"
#include "shim/base/report.h"
#include "shim/base/shim.h"
#include "shim/base/sig.h"
#include "shim/streams/registry.h"

/* Resolves the driver (also when disabled: the real entry point is needed either way). */
static bool active(void)
{
	cg_driver_init();
	return !cg_shim_passthrough() && cg_driver_ready();
}

#define COUNT(n) cg_count(CG_COUNT_ENTRY + CG_E_##n)

/* --- the program's own stream captures: its launches pass through while any is open ------- */
static CUresult capture_begun(CUresult r)
{
	if (r != CUDA_SUCCESS)
		atomic_fetch_sub(&cg_shim.captures, 1);
	return r;
}

/* Before the program's capture begins on h: false where the call passes through untouched;
 * else counted, h's pending work submitted, and the capture counted as open (capture_begun
 * closes it again if the driver refuses). */
static bool capture_begins(enum cg_entry e, CUstream h, bool ptsz)
{
	if (!active())
		return false;
	cg_count(CG_COUNT_ENTRY + e);
	cg_boundary_stream(h, ptsz, CG_R_CAPTURE);
	atomic_fetch_add(&cg_shim.captures, 1);
	return true;
}

#define BEGIN_CAPTURE(n, ptsz, params, args, h)                                                 \
	CG_EXPORT CUresult n params                                                             \
	{                                                                                       \
		if (!capture_begins(CG_E_##n, h, ptsz))                                         \
			return CG_REAL(n) args;                                                 \
		return capture_begun(CG_REAL(n) args);                                          \
	}

BEGIN_CAPTURE(cuStreamBeginCapture_v2, false, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode), hStream)
BEGIN_CAPTURE(cuStreamBeginCapture_v2_ptsz, true, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode), hStream)
BEGIN_CAPTURE(cuStreamBeginCaptureToGraph, false,
              (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode),
              (hStream, hGraph, dependencies, dependencyData, numDependencies, mode), hStream)
BEGIN_CAPTURE(cuStreamBeginCaptureToGraph_ptsz, true,
              (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode),
              (hStream, hGraph, dependencies, dependencyData, numDependencies, mode), hStream)

static CUresult capture_ended(CUresult r)
{
	/* Any answer but "this stream was not capturing" means a capture ended (an invalidated
	 * capture ends with an error too). */
	if (r != CUDA_ERROR_ILLEGAL_STATE) {
		int c = atomic_load(&cg_shim.captures);
		while (c > 0 && !atomic_compare_exchange_weak(&cg_shim.captures, &c, c - 1))
			;
	}
	return r;
}

CG_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	if (!active())
		return CG_REAL(cuStreamEndCapture)(hStream, phGraph);
	COUNT(cuStreamEndCapture);
	return capture_ended(CG_REAL(cuStreamEndCapture)(hStream, phGraph));
}

CG_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	if (!active())
		return CG_REAL(cuStreamEndCapture_ptsz)(hStream, phGraph);
	COUNT(cuStreamEndCapture_ptsz);
	return capture_ended(CG_REAL(cuStreamEndCapture_ptsz)(hStream, phGraph));
}

/* --- the program's own graphs: profile mode weighs a launch by what its graph runs -------- */

/* The launches a graph stands for: its kernel, memset and copy nodes, each of which a launch
 * call would have submitted (events, host functions, empty nodes are none; a child graph's
 * nodes are not looked into). Walked once per instantiation, in profile mode only. */
static uint32_t graph_launches(CUgraph g)
{
	size_t n = 0;
	if (CG_REAL(cuGraphGetNodes)(g, NULL, &n) != CUDA_SUCCESS || n == 0)
		return 0;
	CUgraphNode *nodes = malloc(n * sizeof(*nodes));
	uint32_t launches = 0;
	if (nodes && CG_REAL(cuGraphGetNodes)(g, nodes, &n) == CUDA_SUCCESS)
		for (size_t i = 0; i < n; i++) {
			CUgraphNodeType type;
			if (CG_REAL(cuGraphNodeGetType)(nodes[i], &type) == CUDA_SUCCESS)
				launches += type == CU_GRAPH_NODE_TYPE_KERNEL ||
				            type == CU_GRAPH_NODE_TYPE_MEMSET ||
				            type == CU_GRAPH_NODE_TYPE_MEMCPY;
		}
	free(nodes);
	return launches;
}

static CUresult instantiated(CUresult r, CUgraphExec *exec, CUgraph g)
{
	if (r == CUDA_SUCCESS && atomic_load_explicit(&cg_floor_timing, memory_order_relaxed))
		cg_floor_graph(*exec, graph_launches(g));
	return r;
}

#define INSTANTIATE(n, params, args, exec, g)                                                   \
	CG_EXPORT CUresult n params                                                             \
	{                                                                                       \
		if (active())                                                                   \
			COUNT(n);                                                                \
		return instantiated(CG_REAL(n) args, exec, g);                                  \
	}

INSTANTIATE(cuGraphInstantiateWithFlags,
            (CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags),
            (phGraphExec, hGraph, flags), phGraphExec, hGraph)
INSTANTIATE(cuGraphInstantiateWithParams,
            (CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
            (phGraphExec, hGraph, instantiateParams), phGraphExec, hGraph)
INSTANTIATE(cuGraphInstantiateWithParams_ptsz,
            (CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
            (phGraphExec, hGraph, instantiateParams), phGraphExec, hGraph)

/* A boundary like any other (flush, then forward), which first tells profile mode the launches
 * the graph runs, so that they count in the token this boundary makes. While the process is
 * settled (not profiling then), it is forwarded like the boundary wrappers' (boundary.c):
 * counted as a call and a boundary, and a tail call; the full path is a function of its own,
 * so that the short one saves no registers. */
static inline bool graph_launch_settled(enum cg_entry e)
{
	struct cg_counts *c = cg_count_forwarded();
	if (!c || !cg_real[e])
		return false;
	cg_count_in(c, CG_COUNT_ENTRY + e);
	cg_count_in(c, CG_COUNT_BOUNDARY + CG_R_CAPTURE);
	return true;
}

__attribute__((noinline)) static CUresult graph_launch_full(enum cg_entry e, bool ptsz,
                                                            CUgraphExec exec, CUstream h)
{
	if (active()) {
		cg_count(CG_COUNT_ENTRY + e);
		cg_tls.api = cg_entry_name[e];
		cg_floor_graph_launch(exec);
		cg_boundary_stream(h, ptsz, CG_R_CAPTURE);
	}
	CUresult (*real)(CUgraphExec, CUstream) = (__typeof__(&cuGraphLaunch))cg_real[e];
	if (!real)
		return CUDA_ERROR_NOT_FOUND;
	return CG_FORWARDED(real(exec, h)); /* the audit's mark: this submission came through */
}

#define GRAPH_LAUNCH(n, ptsz)                                                                   \
	CG_EXPORT CUresult n(CUgraphExec hGraphExec, CUstream hStream)                          \
	{                                                                                       \
		if (graph_launch_settled(CG_E_##n))                                             \
			return CG_REAL(n)(hGraphExec, hStream);                                 \
		return graph_launch_full(CG_E_##n, ptsz, hGraphExec, hStream);                  \
	}

GRAPH_LAUNCH(cuGraphLaunch, false)
GRAPH_LAUNCH(cuGraphLaunch_ptsz, true)

/* --- lifetimes: pending work is submitted and graphs destroyed while their objects live ----
 * Each hook serves both ABI versions of its entry point (same prototype); `entry` is the one
 * the program called. */
static CUresult stream_destroy(enum cg_entry entry, CUstream hStream)
{
	if (active()) {
		cg_count(CG_COUNT_ENTRY + entry);
		cg_stream_forget(hStream);
	}
	return ((__typeof__(&cuStreamDestroy_v2))cg_real[entry])(hStream);
}

static CUresult ctx_destroy(enum cg_entry entry, CUcontext ctx)
{
	if (active()) {
		cg_count(CG_COUNT_ENTRY + entry);
		cg_stream_forget_ctx(ctx, CG_R_MODULE);
		cg_layout_forget_ctx(ctx);
		cg_layout_reset(); /* its modules die with it: their function handles may come back */
	}
	return ((__typeof__(&cuCtxDestroy_v2))cg_real[entry])(ctx);
}

static CUresult primary_reset(enum cg_entry entry, CUdevice dev)
{
	if (active()) {
		cg_count(CG_COUNT_ENTRY + entry);
		CUcontext ctx = NULL;
		if (CG_REAL(cuDevicePrimaryCtxRetain)(&ctx, dev) == CUDA_SUCCESS) {
			cg_stream_forget_ctx(ctx, CG_R_MODULE);
			cg_layout_forget_ctx(ctx);
			cg_layout_reset(); /* as for cuCtxDestroy */
			CG_REAL(cuDevicePrimaryCtxRelease_v2)(dev);
		}
	}
	return ((__typeof__(&cuDevicePrimaryCtxReset_v2))cg_real[entry])(dev);
}

static CUresult primary_release(enum cg_entry entry, CUdevice dev)
{
	CUresult (*real)(CUdevice) = (__typeof__(&cuDevicePrimaryCtxRelease_v2))cg_real[entry];
	if (!active())
		return real(dev);
	cg_count(CG_COUNT_ENTRY + entry);
	/* Whether this release is the last one is not observable beforehand: flush everything, and
	 * forget the context's streams if it is gone afterwards (its graphs went with it). */
	cg_boundary_all(CG_R_MODULE);
	CUcontext ctx = NULL;
	unsigned flags = 0;
	int alive = 1;
	bool have = CG_REAL(cuDevicePrimaryCtxRetain)(&ctx, dev) == CUDA_SUCCESS;
	if (have)
		CG_REAL(cuDevicePrimaryCtxRelease_v2)(dev);
	CUresult r = real(dev);
	if (have && CG_REAL(cuDevicePrimaryCtxGetState)(dev, &flags, &alive) == CUDA_SUCCESS && !alive) {
		cg_backend_context_gone(ctx);
		cg_stream_forget_ctx(ctx, CG_R_MODULE);
		cg_layout_forget_ctx(ctx);
		cg_layout_reset(); /* as for cuCtxDestroy */
	}
	return r;
}

#define LIFETIME_HOOK(n, impl, T, arg)                                                          \
	CG_EXPORT CUresult n(T arg)                                                             \
	{                                                                                       \
		cg_driver_init();                                                               \
		return cg_real[CG_E_##n] ? impl(CG_E_##n, arg) : CUDA_ERROR_NOT_FOUND;          \
	}
LIFETIME_HOOK(cuStreamDestroy_v2, stream_destroy, CUstream, hStream)
LIFETIME_HOOK(cuStreamDestroy, stream_destroy, CUstream, hStream)
LIFETIME_HOOK(cuCtxDestroy_v2, ctx_destroy, CUcontext, ctx)
LIFETIME_HOOK(cuCtxDestroy, ctx_destroy, CUcontext, ctx)
LIFETIME_HOOK(cuDevicePrimaryCtxReset_v2, primary_reset, CUdevice, dev)
LIFETIME_HOOK(cuDevicePrimaryCtxReset, primary_reset, CUdevice, dev)
LIFETIME_HOOK(cuDevicePrimaryCtxRelease_v2, primary_release, CUdevice, dev)
LIFETIME_HOOK(cuDevicePrimaryCtxRelease, primary_release, CUdevice, dev)

static CUresult unloaded(void)
{
	/* Function handles of the module die with it and may be reused: forget every template and
	 * layout (streams are re-learned on their next use). */
	cg_stream_forget_ctx(NULL, CG_R_MODULE);
	cg_layout_reset();
	return CUDA_SUCCESS;
}

CG_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
	if (!cg_shim_disabled()) /* (a fork child's is: the table's lock may be held forever) */
		cg_image_forget((uintptr_t)hmod); /* the handle may be reused by the next load */
	if (active()) {
		COUNT(cuModuleUnload);
		unloaded();
	}
	return CG_REAL(cuModuleUnload)(hmod);
}

CG_EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
	if (!cg_shim_disabled())
		cg_image_forget((uintptr_t)library);
	if (active()) {
		COUNT(cuLibraryUnload);
		unloaded();
	}
	return CG_REAL(cuLibraryUnload)(library);
}

/* --- handles the driver hands out as CUkernels: their parameter layout is asked with the
 * CUkernel queries (layout.c), none of which then fails on the wrong kind of handle. --- */
CG_EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	cg_driver_init();
	if (!cg_real[CG_E_cuLibraryGetKernel])
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = CG_REAL(cuLibraryGetKernel)(pKernel, library, name);
	if (r == CUDA_SUCCESS && pKernel && active()) {
		COUNT(cuLibraryGetKernel);
		cg_layout_note_kernel(*pKernel);
	}
	return r;
}

CG_EXPORT CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
	cg_driver_init();
	if (!cg_real[CG_E_cuLibraryEnumerateKernels])
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = CG_REAL(cuLibraryEnumerateKernels)(kernels, numKernels, lib);
	if (r == CUDA_SUCCESS && kernels && active()) {
		COUNT(cuLibraryEnumerateKernels);
		for (unsigned i = 0; i < numKernels; i++)
			cg_layout_note_kernel(kernels[i]);
	}
	return r;
}

/* --- attribute changes: cuBLASLt sets the same attribute before most of its launches, so a
 * repeat is forwarded as is; a real change flushes first (it could affect deferred work). --- */
#define ATTR_SLOTS 1024
static struct { uintptr_t h; int attr, dev, value; bool used; } attr_seen[ATTR_SLOTS];
static pthread_mutex_t attr_lock = PTHREAD_MUTEX_INITIALIZER;

static bool attr_repeat(uintptr_t h, int attr, int dev, int value)
{
	size_t i = (size_t)((h >> 4) * 31 + (uintptr_t)attr * 7 + (uintptr_t)dev) % ATTR_SLOTS;
	pthread_mutex_lock(&attr_lock);
	bool same = attr_seen[i].used && attr_seen[i].h == h && attr_seen[i].attr == attr &&
	            attr_seen[i].dev == dev && attr_seen[i].value == value;
	attr_seen[i].h = h;
	attr_seen[i].attr = attr;
	attr_seen[i].dev = dev;
	attr_seen[i].value = value;
	attr_seen[i].used = true;
	pthread_mutex_unlock(&attr_lock);
	return same;
}

/* An attribute of handle h (of family fam) set to value, about to reach the driver. */
static void attr_set(enum cg_entry e, int fam, bool limits, const void *h, int attr, int dev,
                     int value)
{
	if (!active())
		return;
	cg_count(CG_COUNT_ENTRY + e);
	bool changed = !attr_repeat((uintptr_t)h, fam * 4096 + attr, dev, value);
	if (changed) {
		cg_tls.api = cg_entry_name[e];
		cg_flush_all(CG_R_UNGRAPHABLE);
	}
	if (limits)
		cg_layout_limit_set(h, attr, value, changed);
}

#define ATTR_HOOK(n, fam, limits, params, args, h, attr, dev, value)                            \
	CG_EXPORT CUresult n params                                                             \
	{                                                                                       \
		attr_set(CG_E_##n, fam, limits, h, (int)(attr), (int)(dev), (int)(value));      \
		return CG_REAL(n) args;                                                         \
	}

/* The attribute setters may lower a limit a deferred launch would exceed (`limits`): the shapes
 * proven under the old one are proven again (sig.h, cg_launch_need). */
ATTR_HOOK(cuFuncSetAttribute, 1, true, (CUfunction hfunc, CUfunction_attribute attrib, int value),
          (hfunc, attrib, value), hfunc, attrib, -1, value)
ATTR_HOOK(cuKernelSetAttribute, 2, true, (CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev),
          (attrib, val, kernel, dev), kernel, attrib, dev, val)
ATTR_HOOK(cuFuncSetCacheConfig, 3, false, (CUfunction hfunc, CUfunc_cache config), (hfunc, config), hfunc, 0, -1, config)
ATTR_HOOK(cuKernelSetCacheConfig, 4, false, (CUkernel kernel, CUfunc_cache config, CUdevice dev),
          (kernel, config, dev), kernel, 0, dev, config)

/* --- managed memory: CPU-offload style jobs migrate pages on demand; the work stays exact
 * (allocation is a boundary), but the user should know where graphs meet paging. ---------- */
CG_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	if (!cg_real[CG_E_cuMemAllocManaged] && (cg_driver_init(), !cg_real[CG_E_cuMemAllocManaged]))
		return CUDA_ERROR_NOT_FOUND;
	if (active()) {
		static int said;
		COUNT(cuMemAllocManaged);
		cg_note_once(&said, "managed memory in use (cuMemAllocManaged): CPU-offload style paging "
		             "stays correct under cugraft, but page faults inside replayed graphs cost "
		             "as much as eagerly; prefer device memory in the hot loop");
		cg_tls.api = "cuMemAllocManaged";
		cg_boundary_all(CG_R_ALLOC);
	}
	return CG_REAL(cuMemAllocManaged)(dptr, bytesize, flags);
}
