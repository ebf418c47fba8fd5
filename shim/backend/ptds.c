/* Per-thread default streams: how their deferred work reaches the GPU from another thread
 * (ptds.h). */
#define _GNU_SOURCE
#include "shim/context/context.h"
#include "shim/loader/driver.h"
#include "ptds.h"
#include "shim/base/report.h"
#include "shim/base/shim.h"
#include "shim/context/sstate.h"

atomic_int cg_ptds_outstanding;

/* A redirect made (+1) or caught up with (-1): counted here and in cg_unsettled (shim.h). */
static void outstanding(int d)
{
	atomic_fetch_add(&cg_ptds_outstanding, d);
	atomic_fetch_add(&cg_unsettled, (unsigned)d);
}

bool cg_ptds_open(struct cg_sstate *s)
{
	struct cg_ptds *p = &s->ptds;
	*p = (struct cg_ptds){ 0 };
	int in = cg_backend_enter(s->ctx);
	bool ok = in != CG_CTX_FAILED &&
	          CG_REAL(cuStreamCreate)(&p->proxy, CU_STREAM_DEFAULT) == CUDA_SUCCESS;
	ok = ok && CG_REAL(cuEventCreate)(&p->fence, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
	ok = ok && CG_REAL(cuEventCreate)(&p->handback, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
	cg_backend_leave(in);
	if (!ok)
		cg_ptds_close(s);
	return ok;
}

void cg_ptds_note_eager(void)
{
	static int once;
	cg_note_once(&once, "per-thread default streams: a private stream or event for them could "
	             "not be created; work on them runs eagerly (per_thread_stream)");
}

void cg_ptds_close(struct cg_sstate *s)
{
	struct cg_ptds *p = &s->ptds;
	if (p->redirected)
		outstanding(-1);
	if (!atomic_load(&cg_shim.driver_gone)) {
		int in = cg_backend_enter(s->ctx);
		if (in != CG_CTX_FAILED) { /* work still queued on the proxy completes regardless */
			if (p->proxy)
				CG_REAL(cuStreamDestroy_v2)(p->proxy);
			if (p->fence)
				CG_REAL(cuEventDestroy_v2)(p->fence);
			if (p->handback)
				CG_REAL(cuEventDestroy_v2)(p->handback);
		}
		cg_backend_leave(in);
	}
	*p = (struct cg_ptds){ 0 };
}

void cg_ptds_catch_up(struct cg_sstate *s)
{
	struct cg_ptds *p = &s->ptds;
	if (!p->redirected || !cg_stream_mine(s))
		return;
	int in = cg_backend_enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT
	           : CG_REAL(cuStreamWaitEvent)(CU_STREAM_PER_THREAD, p->handback, 0);
	if (r != CUDA_SUCCESS) {
		/* The stream cannot be ordered after the proxy: let the proxy's work finish first. */
		static int once;
		cg_note_once(&once, "per-thread default streams: cuStreamWaitEvent failed; their threads "
		             "wait on the host for work other threads submitted for them");
		if (in != CG_CTX_FAILED)
			CG_REAL(cuStreamSynchronize)(p->proxy);
	}
	cg_backend_leave(in);
	p->redirected = false;
	outstanding(-1);
}

CUstream cg_ptds_target(struct cg_sstate *s)
{
	struct cg_ptds *p = &s->ptds;
	if (cg_stream_mine(s)) {
		cg_ptds_catch_up(s);
		p->fence_ok = false; /* this submission comes after the fence */
		return CU_STREAM_PER_THREAD;
	}
	if (!p->proxy_open) {
		if (!p->fence_ok) /* never while work is pending (cg_ptds_settle) */
			return NULL;
		CUresult r = CG_REAL(cuStreamWaitEvent)(p->proxy, p->fence, 0);
		if (r != CUDA_SUCCESS) {
			/* The proxy cannot be ordered after the stream: wait for the fence here. */
			static int once;
			cg_note_once(&once, "per-thread default streams: cuStreamWaitEvent failed; other "
			             "threads wait on the host for the work before their deferred work");
			CG_REAL(cuEventSynchronize)(p->fence);
		}
		p->proxy_open = true;
	}
	return p->proxy;
}

bool cg_ptds_settle(struct cg_sstate *s, bool pending)
{
	struct cg_ptds *p = &s->ptds;
	if (p->proxy_open) { /* another thread submitted the stream's work to the proxy */
		p->proxy_open = false;
		int in = cg_backend_enter(s->ctx);
		CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT
		           : CG_REAL(cuEventRecord)(p->handback, p->proxy);
		if (r == CUDA_SUCCESS && !p->redirected) {
			p->redirected = true;
			outstanding(1);
		} else if (r != CUDA_SUCCESS && in != CG_CTX_FAILED) {
			static int once;
			cg_note_once(&once, "per-thread default streams: cuEventRecord failed on a proxy "
			             "stream; the thread that submitted there waits for it on the host");
			CG_REAL(cuStreamSynchronize)(p->proxy); /* the owner cannot wait for it: wait here */
		}
		cg_backend_leave(in);
	}
	if (!pending) {
		p->fence_ok = false;
		return true;
	}
	if (p->fence_ok || !cg_stream_mine(s))
		return true;
	int in = cg_backend_enter(s->ctx);
	p->fence_ok = in != CG_CTX_FAILED &&
	              CG_REAL(cuEventRecord)(p->fence, CU_STREAM_PER_THREAD) == CUDA_SUCCESS;
	cg_backend_leave(in);
	return p->fence_ok;
}
