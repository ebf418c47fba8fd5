/* Process-wide shim state and this thread's (shim.h). Defined here, below every other file, so
 * that reading them ties no file to start-up (init.c), which fills most of them. */
#include "shim.h"

struct cg_shim cg_shim;
/* Not settled until start-up is done (driver.c). Read by every forwarded boundary: aligned to
 * start a cache line, apart from cg_shim's fields (the flusher writes some). */
_Alignas(64) atomic_uint cg_unsettled = CG_UNSETTLED_STARTING;
_Thread_local struct cg_tls cg_tls;

uint64_t cg_thread_uid(void)
{
	static _Atomic uint64_t next_uid = 1;
	if (!cg_tls.uid)
		cg_tls.uid = atomic_fetch_add_explicit(&next_uid, 1, memory_order_relaxed);
	return cg_tls.uid;
}
