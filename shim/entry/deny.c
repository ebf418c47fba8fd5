/* Default deny (deny.h): what a trampoline does before the jump to the real entry point — flush
 * every stream's pending work, count the call, note the first one. */
#include "deny.h"
#include "shim/loader/driver.h"
#include "shim/base/log.h"
#include "shim/base/shim.h"
#include "shim/streams/registry.h"
#include "shim/loader/trampoline.h"

void *cg_deny_enter(uint32_t slot)
{
	if (slot >= CG_TRAMPOLINE_SLOTS)
		return cg_trampoline_target(slot);
	cg_driver_init();
	void *t = cg_trampoline_target(slot);
	if (!cg_shim_passthrough()) {
		if (cg_trampoline_count(slot) == 0)
			cg_log(CG_LOG_DEBUG, "unclassified driver entry point %s: flushing before it",
			       cg_trampoline_name(slot));
		cg_tls.api = cg_trampoline_name(slot);
		cg_flush_all(CG_R_UNKNOWN_API);
	}
	cg_tls.deny_armed = 1;
	return t;
}
