/* Process-wide shim state and this thread's (shim.h). Defined here, below every other file, so
 * that reading them ties no file to start-up (init.c), which fills most of them. */
#include "shim.h"

struct cg_shim cg_shim;
/* Not settled until start-up is done (driver.c). Read by every forwarded boundary: aligned to
 * start a cache line, apart from cg_shim's fields (the flusher writes some). */
_Alignas(64) atomic_uint cg_unsettled = CG_UNSETTLED_STARTING;
_Thread_local int cg_tl_internal;
_Thread_local const char *cg_tl_api;
_Thread_local int cg_tl_forwarding;
_Thread_local int cg_tl_deny_armed;

uint64_t cg_thread_uid(void)
{
	static _Atomic uint64_t next_uid = 1;
	static _Thread_local uint64_t uid;
	if (!uid)
		uid = atomic_fetch_add_explicit(&next_uid, 1, memory_order_relaxed);
	return uid;
}
