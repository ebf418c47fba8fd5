/* The real-driver backend of the policy engine (policy/backend.h): eager submission of recorded
 * ops, chunk graphs built by capturing the ops on a private stream, node patches, launches. */
#ifndef CG_SHIM_BACKEND_H
#define CG_SHIM_BACKEND_H

#include <cuda.h>
#include "policy/backend.h"

struct cg_sstate;

extern const struct cg_backend cg_cuda_backend;

/* Cost-gate timing (backend->time_begin/time_end record events around sampled chunk runs):
 * read the samples whose events have completed, never waiting, and give each eager/graph pair
 * to the engine (cg_stream_timing). Call with s's lock held, outside engine calls; cheap when
 * nothing is in flight. cg_backend_timing_due: any stream has samples in flight. */
void cg_backend_read_timing(struct cg_sstate *s);
bool cg_backend_timing_due(void);

/* The stream record is going away: release the backend's resources for it (with a per-thread
 * stream's proxy and events, ptds.h). */
void cg_backend_forget_stream(struct cg_sstate *s);

#endif
