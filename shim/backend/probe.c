/* What CUPTI's activity tracing adds to a launch call (probe.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "probe.h"
#include "shim/base/shim.h"
#include "shim/context/context.h"
#include "shim/loader/driver.h"
#include "shim/observers/activity.h"
#include "shim/observers/floor.h"

/* An empty kernel, for the oldest target the driver still compiles where it refuses sm_80's. */
static const char *const ptx[] = {
	".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry cugraft_probe()\n{\n\tret;\n}\n",
	".version 6.0\n.target sm_50\n.address_size 64\n.visible .entry cugraft_probe()\n{\n\tret;\n}\n",
};

/* Four blocks of launch calls, paused, traced, traced, paused (drift cancels), each waited
 * for before the next: 1,024 launches, about 5 ms. */
enum { BLOCK = 256, BLOCKS = 4 };

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), by_value);
	return v[n / 2];
}

static char why[160];

static const char *failed(const char *api, CUresult r)
{
	snprintf(why, sizeof why, "%s failed (%s)", api, cg_driver_error_name(r));
	return why;
}

/* The blocks on `st`, timed into untraced[] and traced[]; NULL, or why they could not run. */
static const char *time_blocks(CUfunction f, CUstream st, uint64_t *untraced, uint64_t *traced)
{
	CUresult r = CG_REAL(cuLaunchKernel)(f, 1, 1, 1, 1, 1, 1, 0, st, NULL, NULL);
	if (r == CUDA_SUCCESS)  /* (a first launch loads the kernel) */
		r = CG_REAL(cuStreamSynchronize)(st);
	if (r != CUDA_SUCCESS)
		return failed("cuLaunchKernel", r);
	size_t nu = 0, nt = 0;
	for (int b = 0; b < BLOCKS; b++) {
		bool on = b == 1 || b == 2;
		if (!on && !cg_activity_pause())
			return "CUPTI cannot pause its kernel records";
		for (int k = 0; k < BLOCK && r == CUDA_SUCCESS; k++) {
			uint64_t t0 = cg_monotonic_ns();
			r = CG_REAL(cuLaunchKernel)(f, 1, 1, 1, 1, 1, 1, 0, st, NULL, NULL);
			uint64_t ns = cg_monotonic_ns() - t0;
			if (on)
				traced[nt++] = ns;
			else
				untraced[nu++] = ns;
		}
		CUresult s = CG_REAL(cuStreamSynchronize)(st);
		if (!on && !cg_activity_resume())
			return "CUPTI did not resume its kernel records";
		if (r != CUDA_SUCCESS || s != CUDA_SUCCESS)
			return failed(r != CUDA_SUCCESS ? "cuLaunchKernel" : "cuStreamSynchronize",
			              r != CUDA_SUCCESS ? r : s);
	}
	return NULL;
}

/* Loads the kernel, makes a stream and times the blocks; undoes what it made. */
static const char *probe(uint64_t *untraced, uint64_t *traced)
{
	CUmodule mod = NULL;
	CUresult r = CUDA_ERROR_INVALID_IMAGE;
	for (size_t i = 0; i < sizeof ptx / sizeof ptx[0] && r != CUDA_SUCCESS; i++)
		r = CG_REAL(cuModuleLoadData)(&mod, ptx[i]);
	if (r != CUDA_SUCCESS)
		return failed("cuModuleLoadData", r);
	CUfunction f;
	CUstream st = NULL;
	const char *no = NULL;
	if ((r = CG_REAL(cuModuleGetFunction)(&f, mod, "cugraft_probe")) != CUDA_SUCCESS)
		no = failed("cuModuleGetFunction", r);
	else if ((r = CG_REAL(cuStreamCreate)(&st, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS)
		no = failed("cuStreamCreate", r);
	else
		no = time_blocks(f, st, untraced, traced);
	if (st)
		CG_REAL(cuStreamDestroy_v2)(st);
	CG_REAL(cuModuleUnload)(mod);
	return no;
}

void cg_probe_tracing(void)
{
	CUcontext ctx = NULL;
	if (cg_tls.internal || atomic_load(&cg_shim.captures) > 0 ||
	    CG_REAL(cuCtxGetCurrent)(&ctx) != CUDA_SUCCESS || ctx == NULL)
		return;  /* at a later launch */
	if (!atomic_exchange(&cg_floor_probe_due, false))
		return;  /* another thread took it */
	static uint64_t untraced[BLOCK * BLOCKS / 2], traced[BLOCK * BLOCKS / 2];
	int in = cg_backend_enter(NULL);
	/* Another thread's capture in global mode would take a module load for an unsafe call. */
	CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	bool exchanged = cg_real[CG_E_cuThreadExchangeStreamCaptureMode] &&
	                 CG_REAL(cuThreadExchangeStreamCaptureMode)(&mode) == CUDA_SUCCESS;
	const char *no = probe(untraced, traced);
	if (exchanged)
		CG_REAL(cuThreadExchangeStreamCaptureMode)(&mode);
	cg_backend_leave(in);
	if (no)
		cg_floor_tracing(0, 0, no);
	else
		cg_floor_tracing(median(untraced, BLOCK * BLOCKS / 2),
		                 median(traced, BLOCK * BLOCKS / 2), NULL);
}
