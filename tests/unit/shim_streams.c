/* The shim's stream registry (registry.c), launch hooks (launch.c), CUDA backend (cuda_backend.c)
 * and per-thread stream proxies (ptds.c) in one process against the CPU fake driver, with no
 * start-up: no flusher, no report. The test plays the program: it calls the exported wrappers
 * (cuLaunchKernel, cuMemsetD32Async, cuStreamSynchronize) and reaches the driver's plain entry
 * points through CG_REAL. The fake runs kernels on the host at submission, so "device" memory
 * is read directly. Needs the fake libcuda.so.1 on the library path (tests/meson.build). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "shim/loader/counts.h"
#include "shim/backend/cuda_backend.h"
#include "shim/loader/driver.h"
#include "shim/backend/layout.h"
#include "shim/base/options.h"
#include "shim/base/shim.h"
#include "shim/streams/registry.h"
#include "policy/engine.h"

static CUfunction chain, grid_sum; /* grid_sum: at most 512 threads per block (the fake) */

static int setup(void **state)
{
	/* What start-up does, less the flusher and the report. */
	cg_options_init();
	struct cg_engine_config cfg;
	cg_engine_config_default(&cfg);
	cfg.warmup = 2;
	cfg.measure = false;
	cg_shim.engine = cg_engine_new(&cfg, &cg_cuda_backend, NULL);
	if (!cg_shim.engine)
		return -1;
	cg_driver_init();
	if (!cg_driver_ready() || !cg_real[CG_E_cuInit])
		return -1;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	if (CG_REAL(cuInit)(0) != CUDA_SUCCESS || CG_REAL(cuDeviceGet)(&dev, 0) != CUDA_SUCCESS ||
	    CG_REAL(cuDevicePrimaryCtxRetain)(&ctx, dev) != CUDA_SUCCESS ||
	    CG_REAL(cuCtxSetCurrent)(ctx) != CUDA_SUCCESS ||
	    CG_REAL(cuModuleLoadData)(&mod, "the fake ignores the image") != CUDA_SUCCESS ||
	    CG_REAL(cuModuleGetFunction)(&chain, mod, "cg_chain") != CUDA_SUCCESS ||
	    CG_REAL(cuModuleGetFunction)(&grid_sum, mod, "cg_grid_sum") != CUDA_SUCCESS)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	cg_stream_exit_all();
	return 0;
}

static CUstream new_stream(unsigned flags)
{
	CUstream s = NULL;
	assert_int_equal(CG_REAL(cuStreamCreate)(&s, flags), CUDA_SUCCESS);
	return s;
}

static CUdeviceptr alloc(size_t bytes)
{
	CUdeviceptr p = 0;
	assert_int_equal(CG_REAL(cuMemAlloc_v2)(&p, bytes), CUDA_SUCCESS);
	return p;
}

/* One record per stream handle, one legacy stream per context, one per-thread stream per thread;
 * a forgotten handle gets a new record (the driver reuses handles). */
static void test_stream_records(void **state)
{
	CUstream h = new_stream(CU_STREAM_NON_BLOCKING);
	struct cg_sstate *s = cg_stream_get(h, false);
	assert_non_null(s);
	assert_ptr_equal(cg_stream_get(h, false), s);
	assert_ptr_equal(s->handle, h);
	assert_false(s->legacy);
	assert_false(s->per_thread);
	assert_false(s->blocking);

	struct cg_sstate *legacy = cg_stream_get(NULL, false);
	assert_non_null(legacy);
	assert_true(legacy->legacy);
	assert_ptr_equal(cg_stream_get(CU_STREAM_LEGACY, false), legacy);

	struct cg_sstate *mine = cg_stream_get(NULL, true);
	assert_non_null(mine);
	assert_true(mine->per_thread);
	assert_true(cg_stream_mine(mine));
	assert_ptr_equal(cg_stream_get(CU_STREAM_PER_THREAD, false), mine);

	uint64_t id = s->id;
	cg_stream_forget(h);
	struct cg_sstate *again = cg_stream_get(h, false);
	assert_non_null(again);
	assert_int_not_equal(again->id, id);
	cg_stream_forget(h);
}

/* The program's launches go through launch.c into the engine, which learns the loop and replays
 * it from graphs the backend captured: every sync must see what eager launches would have left. */
static void test_replayed_launches_compute_what_eager_ones_do(void **state)
{
	CUstream h = new_stream(CU_STREAM_DEFAULT);
	CUdeviceptr acc = alloc(sizeof(unsigned long long));
	volatile unsigned long long *host = (volatile unsigned long long *)(uintptr_t)acc;
	*host = 1;
	unsigned long long expected = 1;
	struct cg_stats before, after;
	cg_engine_stats(cg_shim.engine, &before);
	for (int it = 0; it < 12; it++) {
		for (unsigned long long k = 1; k <= 6; k++) {
			unsigned long long v = k * 7 + (unsigned long long)(it % 2);
			void *params[] = { &acc, &v };
			assert_int_equal(cuLaunchKernel(chain, 1, 1, 1, 32, 1, 1, 0, h, params, NULL),
			                 CUDA_SUCCESS);
			expected = (expected * 1000003ULL) ^ v;
		}
		assert_int_equal(cuStreamSynchronize(h), CUDA_SUCCESS);
		assert_int_equal(*host, expected);
	}
	cg_engine_stats(cg_shim.engine, &after);
	assert_true(after.ops - before.ops == 12 * 6);
	assert_true(after.graph_launches > before.graph_launches);
	assert_true(after.ops_replayed > before.ops_replayed);
	assert_true(after.patches > before.patches);  /* the argument that alternates */
	cg_stream_forget(h);
}

static uint64_t engine_ops(void)
{
	struct cg_stats st;
	cg_engine_stats(cg_shim.engine, &st);
	return st.ops;
}

/* One cg_grid_sum launch of `block` threads on `grid` blocks, in clusters of `cluster` blocks
 * (1: no cluster attribute), with `shmem` bytes of dynamic shared memory, must return `want` and
 * reach the engine or not (`given`: an unproven shape goes to the driver as made, past it). */
static void expect(CUstream h, unsigned grid, unsigned block, unsigned cluster, unsigned shmem,
                   CUresult want, bool given)
{
	static unsigned long long out;
	static unsigned in[8 * 1024];
	CUdeviceptr o = (CUdeviceptr)(uintptr_t)&out, i = (CUdeviceptr)(uintptr_t)in;
	void *params[] = { &o, &i };
	CUlaunchAttribute a = { .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION };
	a.value.clusterDim.x = cluster;
	a.value.clusterDim.y = a.value.clusterDim.z = 1;
	CUlaunchConfig c = { .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1, .blockDimX = block,
	                     .blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = shmem, .hStream = h,
	                     .attrs = &a, .numAttrs = cluster > 1 };
	uint64_t ops = engine_ops();
	assert_int_equal(cuLaunchKernelEx(&c, grid_sum, params, NULL), want);
	assert_int_equal(engine_ops() != ops, given);
}

/* A launch is deferred only in a shape the driver accepted for its kernel in its context: a
 * larger block, a grid the earlier ones do not divide, a clustered shape after a cluster
 * attribute changed, shared memory after its attribute changed go past the engine, so that a
 * refusal reaches the call; once accepted, the shape is given to the engine again. */
static void test_unproven_shapes_pass_the_engine(void **state)
{
	CUstream h = new_stream(CU_STREAM_NON_BLOCKING);
	/* the first launch in the context reaches the engine: it cannot match what it never saw */
	expect(h, 4, 64, 2, 0, CUDA_SUCCESS, true);
	for (int it = 0; it < 8; it++) {
		expect(h, 4, 64, 2, 0, CUDA_SUCCESS, true);
		assert_int_equal(cuStreamSynchronize(h), CUDA_SUCCESS);
	}
	/* more threads than its 512: refused at the call, not deferred */
	expect(h, 4, 1024, 1, 0, CUDA_ERROR_INVALID_VALUE, false);
	/* a larger clustered block: proven once, then given */
	expect(h, 4, 128, 2, 0, CUDA_SUCCESS, false);
	expect(h, 4, 128, 2, 0, CUDA_SUCCESS, true);
	/* a smaller cluster of smaller blocks is covered */
	expect(h, 4, 64, 1, 0, CUDA_SUCCESS, true);
	/* grids so far: 4 (divisor 4); 6 is not a multiple, 2 is then (divisor 2), 3 is not */
	expect(h, 6, 64, 1, 0, CUDA_SUCCESS, false);
	expect(h, 2, 64, 1, 0, CUDA_SUCCESS, true);
	expect(h, 3, 64, 1, 0, CUDA_SUCCESS, false);
	expect(h, 5, 64, 1, 0, CUDA_SUCCESS, true);
	/* a cluster attribute that may lower what fits: clustered shapes are proven again */
	assert_int_equal(cuFuncSetAttribute(grid_sum, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 0),
	                 CUDA_SUCCESS);
	expect(h, 4, 64, 2, 0, CUDA_SUCCESS, false);
	expect(h, 4, 64, 2, 0, CUDA_SUCCESS, true);
	/* allowing non-portable cluster sizes lowers nothing: set before every clustered launch (as
	 * CUTLASS's cluster launcher does), it leaves them proven */
	for (int it = 0; it < 3; it++) {
		assert_int_equal(cuFuncSetAttribute(grid_sum, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
		                 CUDA_SUCCESS);
		expect(h, 4, 64, 2, 0, CUDA_SUCCESS, true);
	}
	/* shared memory above a lowered attribute: refused at the call */
	assert_int_equal(cuFuncSetAttribute(grid_sum, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 << 10),
	                 CUDA_SUCCESS);
	expect(h, 2, 64, 1, 60 << 10, CUDA_SUCCESS, false);
	expect(h, 2, 64, 1, 60 << 10, CUDA_SUCCESS, true);
	assert_int_equal(cuFuncSetAttribute(grid_sum, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0),
	                 CUDA_SUCCESS);
	expect(h, 2, 64, 1, 60 << 10, CUDA_ERROR_INVALID_VALUE, false);
	/* (what the lowered attribute still allows is proven again too) */
	expect(h, 2, 64, 1, 40 << 10, CUDA_SUCCESS, false);
	expect(h, 2, 64, 1, 40 << 10, CUDA_SUCCESS, true);
	assert_int_equal(cuStreamSynchronize(h), CUDA_SUCCESS);
	cg_stream_forget(h);
}

/* One cg_grid_sum launch of 64 threads on `grid` blocks in clusters of 2 (none: `cluster` 0)
 * with a preferred substitute cluster of `pref` blocks (none: 0); returns the launch's result,
 * and in *given whether it reached the engine. */
static CUresult launch_preferred(CUstream h, unsigned grid, unsigned cluster, unsigned pref, bool *given)
{
	static unsigned long long out;
	static unsigned in[8 * 1024];
	CUdeviceptr o = (CUdeviceptr)(uintptr_t)&out, i = (CUdeviceptr)(uintptr_t)in;
	void *params[] = { &o, &i };
	CUlaunchAttribute a[2];
	unsigned n = 0;
	if (cluster) {
		a[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
		a[n].value.clusterDim.x = cluster;
		a[n].value.clusterDim.y = a[n].value.clusterDim.z = 1;
		n++;
	}
	if (pref) {
		a[n].id = CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION;
		a[n].value.preferredClusterDim.x = pref;
		a[n].value.preferredClusterDim.y = a[n].value.preferredClusterDim.z = 1;
		n++;
	}
	CUlaunchConfig c = { .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64,
	                     .blockDimY = 1, .blockDimZ = 1, .hStream = h, .attrs = a, .numAttrs = n };
	uint64_t ops = engine_ops();
	CUresult r = cuLaunchKernelEx(&c, grid_sum, params, NULL);
	*given = engine_ops() != ops;
	return r;
}

/* A preferred substitute cluster must divide the grid (cuda.h): a grid it does not divide is a
 * shape no device allows, refused at the call, even where the function accepted that grid with
 * other attributes and the cluster size before. */
static void test_preferred_cluster_must_divide_the_grid(void **state)
{
	CUstream h = new_stream(CU_STREAM_NON_BLOCKING);
	bool given;
	/* grid 2 accepted: every even grid is proven for the function */
	assert_int_equal(launch_preferred(h, 2, 2, 0, &given), CUDA_SUCCESS);
	assert_int_equal(cuStreamSynchronize(h), CUDA_SUCCESS);
	/* a loop of clusters of 2 preferring 4, on grids of 8: learned and replayed */
	for (int it = 0; it < 8; it++) {
		assert_int_equal(launch_preferred(h, 8, 2, 4, &given), CUDA_SUCCESS);
		assert_int_equal(cuStreamSynchronize(h), CUDA_SUCCESS);
	}
	/* a grid of 6: clusters of 2 divide it, the preferred 4 does not */
	assert_int_equal(launch_preferred(h, 6, 2, 4, &given), CUDA_ERROR_INVALID_CLUSTER_SIZE);
	assert_false(given);
	assert_int_equal(cuStreamSynchronize(h), CUDA_SUCCESS);
	cg_stream_forget(h);
}

/* A context's modules die with it, and their function handles may come back for other kernels
 * of later modules: the layouts of its functions go with it, also from this thread's cache (a
 * dead handle has none: the fake says so when asked again). */
static void test_destroyed_context_forgets_its_functions(void **state)
{
	CUcontext prev = NULL, ctx = NULL;
	CUmodule mod;
	CUfunction f;
	assert_int_equal(CG_REAL(cuCtxGetCurrent)(&prev), CUDA_SUCCESS);
	assert_int_equal(CG_REAL(cuCtxCreate_v4)(&ctx, NULL, 0, 0), CUDA_SUCCESS);
	assert_int_equal(CG_REAL(cuModuleLoadData)(&mod, "the fake ignores the image"), CUDA_SUCCESS);
	assert_int_equal(CG_REAL(cuModuleGetFunction)(&f, mod, "cg_chain"), CUDA_SUCCESS);
	assert_non_null(cg_layout_of(f));
	assert_int_equal(cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
	assert_null(cg_layout_of(f));
	assert_int_equal(CG_REAL(cuCtxSetCurrent)(prev), CUDA_SUCCESS);
	assert_non_null(cg_layout_of(chain));
}

/* Another thread lowers a function's shared-memory limit while a launch above the new limit is
 * on its way (accepted by the driver under the old one): its record, which comes after the set,
 * must not prove that shape. A launch started after the set is recorded as usual. */
static void test_limit_lowered_during_a_launch(void **state)
{
	const int smem = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
	CUcontext ctx = NULL;
	assert_int_equal(CG_REAL(cuCtxGetCurrent)(&ctx), CUDA_SUCCESS);
	assert_int_equal(cuFuncSetAttribute(grid_sum, smem, 64 << 10), CUDA_SUCCESS);
	const struct cg_layout *l = cg_layout_of(grid_sum);
	assert_non_null(l);
	struct cg_launch_need n = { .layout = l, .open = 64ull << 32 | (50u << 10), .grid = { 1, 1, 1 },
	                            .limits = atomic_load(&cg_layout_limits) };
	assert_false(cg_launch_proven(&n, ctx));
	assert_int_equal(cuFuncSetAttribute(grid_sum, smem, 0), CUDA_SUCCESS);
	cg_launch_accepted(&n, ctx);
	assert_false(cg_launch_proven(&n, ctx));
	struct cg_launch_need m = n;
	m.open = 64ull << 32 | (40u << 10);
	m.limits = atomic_load(&cg_layout_limits);
	cg_launch_accepted(&m, ctx);
	assert_true(cg_launch_proven(&m, ctx));
}

/* Memsets whose destination moves every iteration: captured as memset nodes and patched there
 * (cuda_backend.c's patch_memop). */
static void test_replayed_memsets_follow_their_buffers(void **state)
{
	CUstream h = new_stream(CU_STREAM_DEFAULT);
	enum { N = 64 };
	CUdeviceptr buf[2] = { alloc(N * 4), alloc(N * 4) };
	struct cg_stats before, after;
	cg_engine_stats(cg_shim.engine, &before);
	for (unsigned it = 0; it < 12; it++) {
		CUdeviceptr dst = buf[it % 2];
		assert_int_equal(cuMemsetD32Async(dst, 0, N, h), CUDA_SUCCESS);
		assert_int_equal(cuMemsetD32Async(dst, it + 1, N / 2, h), CUDA_SUCCESS);
		assert_int_equal(cuStreamSynchronize(h), CUDA_SUCCESS);
		const unsigned *p = (const unsigned *)(uintptr_t)dst;
		for (unsigned i = 0; i < N; i++)
			assert_int_equal(p[i], i < N / 2 ? it + 1 : 0);
	}
	cg_engine_stats(cg_shim.engine, &after);
	assert_true(after.graph_launches > before.graph_launches);
	cg_stream_forget(h);
}

/* One launch of cg_chain(acc, v) on h (ptsz: through the _ptsz entry point, h NULL meaning the
 * per-thread stream); returns what acc holds after it, given `acc` before. */
static unsigned long long chain_on(CUstream h, bool ptsz, CUdeviceptr acc, unsigned long long v,
                                   unsigned long long acc_before)
{
	void *params[] = { &acc, &v };
	CUresult r = ptsz ? cuLaunchKernel_ptsz(chain, 1, 1, 1, 1, 1, 1, 0, h, params, NULL)
	                  : cuLaunchKernel(chain, 1, 1, 1, 1, 1, 1, 0, h, params, NULL);
	assert_int_equal(r, CUDA_SUCCESS);
	return (acc_before * 1000003ULL) ^ v;
}

/* A loop of four launches and a sync on h, until the engine has learned it; then the first half
 * of it, which stays deferred waiting for the rest of its chunk. Returns acc in program order. */
static unsigned long long learn_then_defer_half(CUstream h, bool ptsz, CUdeviceptr acc,
                                                unsigned long long expected)
{
	volatile unsigned long long *host = (volatile unsigned long long *)(uintptr_t)acc;
	*host = expected;
	for (int it = 0; it < 8; it++) {
		for (unsigned long long k = 1; k <= 4; k++)
			expected = chain_on(h, ptsz, acc, k, expected);
		assert_int_equal(ptsz ? cuStreamSynchronize_ptsz(h) : cuStreamSynchronize(h), CUDA_SUCCESS);
		assert_int_equal(*host, expected);
	}
	for (unsigned long long k = 1; k <= 2; k++)
		expected = chain_on(h, ptsz, acc, k, expected);
	return expected;
}

/* The legacy default stream waits for earlier work of blocking streams: work the engine defers
 * on a blocking stream is submitted before a launch on the legacy stream (cg_stream_order), and
 * the result is the program's order's. */
static void test_legacy_launch_submits_blocking_streams_first(void **state)
{
	CUstream h = new_stream(CU_STREAM_DEFAULT);
	struct cg_sstate *s = cg_stream_get(h, false);
	assert_non_null(s);
	assert_true(s->blocking);
	CUdeviceptr acc = alloc(sizeof(unsigned long long));
	unsigned long long expected = learn_then_defer_half(h, false, acc, 3);
	assert_true(atomic_load(&s->pending));
	expected = chain_on(NULL, false, acc, 99, expected);
	assert_false(atomic_load(&s->pending));
	assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
	assert_int_equal(*(volatile unsigned long long *)(uintptr_t)acc, expected);
	cg_stream_forget(h);
}

/* Another thread flushes what this thread's per-thread stream deferred: it goes out through
 * the stream's proxy (ptds.c), and this thread's next use of the stream waits for it. */
static CUcontext ptds_ctx;

static void *flush_from_elsewhere(void *arg)
{
	CG_REAL(cuCtxSetCurrent)(ptds_ctx);
	cg_flush_all(CG_R_UNKNOWN_API);
	return NULL;
}

static void test_per_thread_stream_flushed_by_another_thread(void **state)
{
	assert_int_equal(CG_REAL(cuCtxGetCurrent)(&ptds_ctx), CUDA_SUCCESS);
	struct cg_sstate *s = cg_stream_get(NULL, true);
	assert_non_null(s);
	assert_true(s->per_thread);
	assert_non_null(s->eng);  /* its proxy could be made */
	CUdeviceptr acc = alloc(sizeof(unsigned long long));
	volatile unsigned long long *host = (volatile unsigned long long *)(uintptr_t)acc;
	unsigned long long expected = learn_then_defer_half(NULL, true, acc, 5);
	assert_true(atomic_load(&s->pending));
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, flush_from_elsewhere, NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_false(atomic_load(&s->pending));
	assert_int_equal(*host, expected);  /* the fake ran it on submission, on the proxy */
	assert_true(s->ptds.redirected);    /* this thread has yet to catch up */
	expected = chain_on(NULL, true, acc, 77, expected);
	assert_false(s->ptds.redirected);
	assert_int_equal(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS);
	assert_int_equal(*host, expected);
}

static uint64_t forwarded(enum cg_entry e)
{
	return cg_count_total(CG_COUNT_FORWARD + e);
}

static uint64_t engine_boundaries(void)
{
	struct cg_stats st;
	cg_engine_stats(cg_shim.engine, &st);
	return st.boundaries;
}

static CUevent new_event(void)
{
	CUevent ev = NULL;
	assert_int_equal(CG_REAL(cuEventCreate)(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
	return ev;
}

/* A forwarded boundary (event record, stream query, graph launch) takes the short path only
 * while every stream is settled: with ops on any stream since its last boundary, it goes the
 * full way, and a boundary on that stream reaches the engine, which cuts the chunk there. The
 * report counts both paths' calls alike. */
static void test_forwarded_boundaries_skip_the_shim_only_while_settled(void **state)
{
	CUstream a = new_stream(CU_STREAM_NON_BLOCKING), b = new_stream(CU_STREAM_NON_BLOCKING);
	CUevent ev = new_event();
	CUdeviceptr acc = alloc(sizeof(unsigned long long));
	/* every stream record has its first boundary: all settled */
	assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
	assert_int_equal(atomic_load(&cg_unsettled), 0);
	uint64_t rec = forwarded(CG_E_cuEventRecord), query = forwarded(CG_E_cuStreamQuery);
	uint64_t calls = cg_count_entry(CG_E_cuEventRecord), events = cg_count_boundaries(CG_R_EVENT);
	assert_int_equal(cuEventRecord(ev, a), CUDA_SUCCESS);
	assert_int_equal(cuStreamQuery(a), CUDA_SUCCESS);
	assert_int_equal(forwarded(CG_E_cuEventRecord), rec + 1);
	assert_int_equal(forwarded(CG_E_cuStreamQuery), query + 1);

	/* b is learning: an op since its last boundary */
	chain_on(b, false, acc, 1, 0);
	assert_int_not_equal(atomic_load(&cg_unsettled), 0);
	assert_int_equal(cuEventRecord(ev, a), CUDA_SUCCESS);  /* another stream: full path */
	assert_int_equal(forwarded(CG_E_cuEventRecord), rec + 1);
	uint64_t cuts = engine_boundaries();
	assert_int_equal(cuEventRecord(ev, b), CUDA_SUCCESS);  /* b's own: the engine cuts */
	assert_int_equal(engine_boundaries(), cuts + 1);
	assert_int_equal(forwarded(CG_E_cuEventRecord), rec + 1);
	/* settled again: the next one is forwarded */
	assert_int_equal(atomic_load(&cg_unsettled), 0);
	assert_int_equal(cuEventRecord(ev, b), CUDA_SUCCESS);
	assert_int_equal(forwarded(CG_E_cuEventRecord), rec + 2);
	assert_int_equal(engine_boundaries(), cuts + 1);

	/* every call counted once, as its entry point and as an event boundary */
	assert_int_equal(cg_count_entry(CG_E_cuEventRecord), calls + 4);
	assert_int_equal(cg_count_boundaries(CG_R_EVENT), events + 4);

	/* the program's own graph launch (a hook) too: the short path leaves cg_tls.api alone */
	CUgraph g;
	CUgraphExec exec;
	assert_int_equal(CG_REAL(cuGraphCreate)(&g, 0), CUDA_SUCCESS);
	assert_int_equal(CG_REAL(cuGraphInstantiateWithFlags)(&exec, g, 0), CUDA_SUCCESS);
	uint64_t launches = cg_count_entry(CG_E_cuGraphLaunch);
	uint64_t captures = cg_count_boundaries(CG_R_CAPTURE);
	cg_tls.api = "before";
	assert_int_equal(atomic_load(&cg_unsettled), 0);
	assert_int_equal(cuGraphLaunch(exec, a), CUDA_SUCCESS);
	assert_string_equal(cg_tls.api, "before");
	chain_on(b, false, acc, 2, 0);  /* b busy again: the full path */
	assert_int_equal(cuGraphLaunch(exec, a), CUDA_SUCCESS);
	assert_string_equal(cg_tls.api, "cuGraphLaunch");
	assert_int_equal(cg_count_entry(CG_E_cuGraphLaunch), launches + 2);
	assert_int_equal(cg_count_boundaries(CG_R_CAPTURE), captures + 2);
	CG_REAL(cuGraphExecDestroy)(exec);
	CG_REAL(cuGraphDestroy)(g);
	assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
	CG_REAL(cuEventDestroy_v2)(ev);
	cg_stream_forget(a);
	cg_stream_forget(b);
}

/* Work deferred on a blocking stream: an event recorded on it, or on the legacy stream (which
 * waits for it), must come after that work, which goes out first; not forwarded past it. */
static void test_event_record_submits_deferred_work_first(void **state)
{
	CUstream h = new_stream(CU_STREAM_DEFAULT);
	struct cg_sstate *s = cg_stream_get(h, false);
	assert_non_null(s);
	CUevent ev = new_event();
	CUdeviceptr acc = alloc(sizeof(unsigned long long));
	volatile unsigned long long *host = (volatile unsigned long long *)(uintptr_t)acc;
	for (int legacy = 0; legacy < 2; legacy++) {
		unsigned long long expected = learn_then_defer_half(h, false, acc, 3);
		assert_true(atomic_load(&s->pending));
		assert_int_not_equal(*host, expected);  /* the fake has not run it yet */
		uint64_t rec = forwarded(CG_E_cuEventRecord);
		assert_int_equal(cuEventRecord(ev, legacy ? NULL : h), CUDA_SUCCESS);
		assert_int_equal(forwarded(CG_E_cuEventRecord), rec);
		assert_false(atomic_load(&s->pending));
		assert_int_equal(*host, expected);
		assert_int_equal(cuStreamSynchronize(h), CUDA_SUCCESS);
	}
	CG_REAL(cuEventDestroy_v2)(ev);
	cg_stream_forget(h);
}

static void *sync_from_elsewhere(void *arg)
{
	CG_REAL(cuCtxSetCurrent)(ptds_ctx);
	return (void *)(uintptr_t)cuCtxSynchronize();
}

/* Another thread's context-wide sync submitted this thread's per-thread stream's deferred work
 * through its proxy and left the stream settled: an event recorded on the stream must still
 * wait for the proxy's work (catch up), not be forwarded ahead of it. */
static void test_forwarded_boundary_catches_up_with_another_threads_flush(void **state)
{
	assert_int_equal(CG_REAL(cuCtxGetCurrent)(&ptds_ctx), CUDA_SUCCESS);
	struct cg_sstate *s = cg_stream_get(NULL, true);
	assert_non_null(s);
	assert_non_null(s->eng);
	CUevent ev = new_event();
	CUdeviceptr acc = alloc(sizeof(unsigned long long));
	learn_then_defer_half(NULL, true, acc, 11);
	assert_true(atomic_load(&s->pending));
	pthread_t t;
	void *r = NULL;
	assert_int_equal(pthread_create(&t, NULL, sync_from_elsewhere, NULL), 0);
	assert_int_equal(pthread_join(t, &r), 0);
	assert_int_equal((uintptr_t)r, CUDA_SUCCESS);
	assert_int_equal(atomic_load(&s->calm), CG_SETTLED);
	assert_true(s->ptds.redirected);
	assert_int_equal(cuEventRecord_ptsz(ev, NULL), CUDA_SUCCESS);
	assert_false(s->ptds.redirected);
	assert_int_equal(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS);
	CG_REAL(cuEventDestroy_v2)(ev);
}

/* A chunk launched from its graph at an event record is still to be marked by the next wait
 * (the cost gate's `exposed`), but a boundary that is not a wait changes nothing there: a
 * stream query after the record is forwarded, and the sync after it still reaches the engine,
 * which marks the chunk and leaves the stream settled. */
static void test_query_after_a_launched_chunk_is_forwarded_the_sync_is_not(void **state)
{
	CUstream h = new_stream(CU_STREAM_NON_BLOCKING);
	struct cg_sstate *s = cg_stream_get(h, false);
	assert_non_null(s);
	CUevent ev = new_event();
	CUdeviceptr acc = alloc(sizeof(unsigned long long));
	volatile unsigned long long *host = (volatile unsigned long long *)(uintptr_t)acc;
	unsigned long long expected = 7;
	*host = expected;
	struct cg_stats before, after;
	cg_engine_stats(cg_shim.engine, &before);
	for (int it = 0; it < 16; it++) {
		for (unsigned long long k = 1; k <= 4; k++)
			expected = chain_on(h, false, acc, k, expected);
		assert_int_equal(cuEventRecord(ev, h), CUDA_SUCCESS);
		uint64_t queries = forwarded(CG_E_cuStreamQuery), syncs = engine_boundaries();
		assert_int_equal(cuStreamQuery(h), CUDA_SUCCESS);
		assert_int_equal(*host, expected);  /* the record submitted the chunk */
		if (it == 15) {  /* learned, replayed, timed for the cost gate long ago */
			/* the chunk is to be marked */
			assert_int_equal(atomic_load(&s->calm), CG_QUIET);
			assert_int_equal(forwarded(CG_E_cuStreamQuery), queries + 1);
		}
		assert_int_equal(cuStreamSynchronize(h), CUDA_SUCCESS);
		if (it == 15) {
			assert_int_equal(engine_boundaries(), syncs + 1);
			assert_int_equal(atomic_load(&s->calm), CG_SETTLED);
		}
	}
	cg_engine_stats(cg_shim.engine, &after);
	assert_true(after.graph_launches > before.graph_launches);
	CG_REAL(cuEventDestroy_v2)(ev);
	cg_stream_forget(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_records),
		cmocka_unit_test(test_replayed_launches_compute_what_eager_ones_do),
		cmocka_unit_test(test_replayed_memsets_follow_their_buffers),
		cmocka_unit_test(test_unproven_shapes_pass_the_engine),
		cmocka_unit_test(test_preferred_cluster_must_divide_the_grid),
		cmocka_unit_test(test_limit_lowered_during_a_launch),
		cmocka_unit_test(test_destroyed_context_forgets_its_functions),
		cmocka_unit_test(test_legacy_launch_submits_blocking_streams_first),
		cmocka_unit_test(test_per_thread_stream_flushed_by_another_thread),
		cmocka_unit_test(test_forwarded_boundaries_skip_the_shim_only_while_settled),
		cmocka_unit_test(test_event_record_submits_deferred_work_first),
		cmocka_unit_test(test_forwarded_boundary_catches_up_with_another_threads_flush),
		cmocka_unit_test(test_query_after_a_launched_chunk_is_forwarded_the_sync_is_not),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
