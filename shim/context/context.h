/* Contexts for the shim's own driver calls (context.c): the backend's, the registry's and the
 * collectives' work may run on any thread, so each call makes its stream's context current. */
#ifndef CG_SHIM_CONTEXT_H
#define CG_SHIM_CONTEXT_H

#include <cuda.h>
#include <stdbool.h>

/* Makes ctx current on this thread if it is not: CG_CTX_KEPT (it was, or ctx is NULL),
 * CG_CTX_PUSHED (undo with cg_ctx_leave), CG_CTX_FAILED (it cannot be made current). */
enum { CG_CTX_KEPT, CG_CTX_PUSHED, CG_CTX_FAILED };
int cg_ctx_enter(CUcontext ctx);
void cg_ctx_leave(int entered);
/* The same for the shim's own driver calls: the calls made meanwhile are not the program's. */
int cg_backend_enter(CUcontext ctx);
void cg_backend_leave(int entered);

/* A context was destroyed behind our back (last primary-context release): its graphs and
 * streams died with it and must not be destroyed again. */
void cg_backend_context_gone(CUcontext ctx);
/* The context is gone (cg_backend_context_gone), or the driver is (exit work): nothing of it
 * may be destroyed or used. */
bool cg_ctx_dead(CUcontext ctx);

#endif
