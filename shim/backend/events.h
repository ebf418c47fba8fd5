/* What the shim records while the program runs: engine events (first occurrences, rate-limited),
 * boundary and bypass counts by reason, the devices in use. The exit summary (summary.h) reads
 * them. */
#ifndef CG_SHIM_EVENTS_H
#define CG_SHIM_EVENTS_H

#include <cuda.h>
#include <stdint.h>

#include "shim/loader/counts.h"
#include "shim/observers/floor.h"
#include "nvtx.h"
#include "policy/engine.h"

/* backend->event: called with the stream's lock held. */
void cg_events_engine(void *be, const struct cg_event *ev);
/* A boundary the program made (counted by kind for the summary). Inline: every pass-through
 * call counts one. */
static inline void cg_events_boundary(enum cg_reason why)
{
	cg_count(CG_COUNT_BOUNDARY + why);
	cg_floor_boundary(why);
}
/* An op that ran eagerly without reaching the engine (ungraphable, out of scope, per-thread
 * stream, inside the program's capture): counted with the engine's fallbacks in the summary. */
static inline void cg_events_bypass(enum cg_reason why)
{
	cg_count(CG_COUNT_BYPASS + why);
	if (cg_nvtx_on() && why != CG_R_CAPTURE)   /* (the summary counts captured ops apart) */
		cg_nvtx_bypass(why);
}
/* A stream of context `ctx` was seen: its device is named in the summary's `devices` (the
 * header is written before the program picks a device). */
void cg_events_device(CUcontext ctx);
struct cg_json;
/* The summary's "devices":[{ordinal, name}]. */
void cg_events_json_devices(struct cg_json *j);

#endif
