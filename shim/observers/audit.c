/* Audit mode (audit.h). CUPTI is loaded with dlopen, so the library runs where it is absent;
 * a second CUPTI client (Nsight, a profiler, compute-sanitizer) makes subscription fail: we say
 * so and carry on without the audit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cupti.h>

#include "audit.h"
#include "shim/base/backtrace.h"
#include "shim/base/json.h"
#include "shim/base/log.h"
#include "shim/base/report.h"
#include "shim/base/shim.h"


/* Driver calls that submit GPU work: each must have come through a wrapper. */
#define AUDITED(X) X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx) \
	X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel) X(cuLaunchCooperativeKernel_ptsz) \
	X(cuLaunch) X(cuLaunchGrid) X(cuLaunchGridAsync) X(cuMemsetD8Async) X(cuMemsetD8Async_ptsz) \
	X(cuMemsetD16Async) X(cuMemsetD16Async_ptsz) X(cuMemsetD32Async) X(cuMemsetD32Async_ptsz) \
	X(cuMemcpyDtoDAsync_v2) X(cuMemcpyDtoDAsync_v2_ptsz) X(cuMemcpyHtoDAsync_v2) \
	X(cuMemcpyHtoDAsync_v2_ptsz) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoHAsync_v2_ptsz) \
	X(cuMemcpyAsync) X(cuMemcpyAsync_ptsz) X(cuGraphLaunch) X(cuGraphLaunch_ptsz) \
	X(cuLaunchHostFunc) X(cuLaunchHostFunc_ptsz) X(cuEventRecord) X(cuEventRecord_ptsz) \
	X(cuStreamWaitEvent) X(cuStreamWaitEvent_ptsz)

enum audited {
#define X(n) A_##n,
	AUDITED(X)
#undef X
	A_COUNT
};
static const char *const audited_name[A_COUNT] = {
#define X(n) #n,
	AUDITED(X)
#undef X
};

static bool running;
static _Atomic uint64_t seen[A_COUNT], escaped[A_COUNT];

static int audited_of(CUpti_CallbackId cbid)
{
	switch (cbid) {
#define X(n) case CUPTI_DRIVER_TRACE_CBID_##n: return A_##n;
	AUDITED(X)
#undef X
	default: return -1;
	}
}

static void CUPTIAPI on_driver_call(void *userdata, CUpti_CallbackDomain domain,
                                    CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cb = data;
	if (cb->callbackSite != CUPTI_API_ENTER)
		return;
	int a = audited_of(cbid);
	bool armed = cg_tls.deny_armed;
	cg_tls.deny_armed = 0;
	if (a < 0)
		return;
	atomic_fetch_add_explicit(&seen[a], 1, memory_order_relaxed);
	if (cg_tls.forwarding || armed)
		return;
	if (atomic_fetch_add_explicit(&escaped[a], 1, memory_order_relaxed) == 0 && cg_report_active()) {
		struct cg_json *j = cg_json_take();
		cg_json_begin(j, "escaped");
		cg_json_str(j, "api", audited_name[a]);
		void *pcs[16];
		int n = cg_backtrace_capture(pcs, 16, 2);
		if (n > 0) {
			cg_json_backtrace(j, "backtrace", pcs, n);
			cg_json_backtrace_where(j, "where", pcs, n);
		}
		if (cg_json_end(j))
			cg_report_emit(j);
		cg_json_give(j);
	}
}

void *cg_cupti_open(void)
{
	static const char *const names[] = {
		"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
		"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
	}
	const char *home = getenv("CUDA_HOME");
	if (home) {
		char path[512];
		snprintf(path, sizeof(path), "%s/lib64/libcupti.so", home);
		return dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	return NULL;
}

void cg_audit_start(void)
{
	void *h = cg_cupti_open();
	if (!h) {
		cg_log(CG_LOG_WARN, "CUGRAFT_AUDIT: libcupti cannot be loaded; audit is off");
		return;
	}
	__typeof__(&cuptiSubscribe) subscribe = (__typeof__(&cuptiSubscribe))dlsym(h, "cuptiSubscribe");
	__typeof__(&cuptiEnableDomain) enable = (__typeof__(&cuptiEnableDomain))dlsym(h, "cuptiEnableDomain");
	CUpti_SubscriberHandle sub;
	CUptiResult r = subscribe && enable ? subscribe(&sub, on_driver_call, NULL) : CUPTI_ERROR_UNKNOWN;
	if (r == CUPTI_SUCCESS)
		r = enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
	if (r != CUPTI_SUCCESS) {
		cg_log(CG_LOG_WARN, "CUGRAFT_AUDIT: CUPTI subscription failed (%d)%s; audit is off", (int)r,
		       r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ?
		       ": another CUPTI client (profiler, sanitizer) is attached" : "");
		return;
	}
	running = true;
}

void cg_audit_json(struct cg_json *j)
{
	if (!running)
		return;
	uint64_t total_seen = 0, total_escaped = 0, launches_seen = 0, launches_escaped = 0;
	for (int a = 0; a < A_COUNT; a++) {
		total_seen += atomic_load(&seen[a]);
		total_escaped += atomic_load(&escaped[a]);
		if (a <= A_cuLaunchGridAsync) { /* the launch entry points head the list */
			launches_seen += atomic_load(&seen[a]);
			launches_escaped += atomic_load(&escaped[a]);
		}
	}
	cg_json_uint(j, "escaped_launches", launches_escaped);
	cg_json_uint(j, "escaped_calls", total_escaped);
	cg_json_obj(j, "audit");
	cg_json_uint(j, "driver_calls_seen", total_seen);
	cg_json_uint(j, "driver_launches_seen", launches_seen);
	cg_json_obj(j, "escaped");
	for (int a = 0; a < A_COUNT; a++)
		if (atomic_load(&escaped[a]))
			cg_json_uint(j, audited_name[a], atomic_load(&escaped[a]));
	cg_json_obj_end(j);
	cg_json_obj_end(j);
}
