/* Contexts as the shim's own driver calls need them (context.h): made current for the duration
 * of a call, and remembered once destroyed behind the shim's back. */
#include <stdatomic.h>

#include "context.h"
#include "shim/loader/driver.h"
#include "shim/base/shim.h"

#define DEAD_CTXS 16
static _Atomic(CUcontext) dead_ctx[DEAD_CTXS];
static atomic_uint dead_next;

void cg_backend_context_gone(CUcontext ctx)
{
	atomic_store(&dead_ctx[atomic_fetch_add(&dead_next, 1) % DEAD_CTXS], ctx);
}

bool cg_ctx_dead(CUcontext ctx)
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
	cg_tls.internal++;
	cg_tls.forwarding++;
	return cg_ctx_enter(ctx);
}

void cg_backend_leave(int entered)
{
	cg_ctx_leave(entered);
	cg_tls.forwarding--;
	cg_tls.internal--;
}
