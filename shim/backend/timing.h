/* Cost-gate timing of chunk runs (timing.c): the backend's time_begin/time_end record two events
 * on the program's stream around a sampled run; they are read later, never waited for. */
#ifndef CG_SHIM_TIMING_H
#define CG_SHIM_TIMING_H

#include <stdbool.h>
#include <stdint.h>

struct cg_sstate;

/* backend->time_begin and backend->time_end (policy/backend.h); `stream` is a cg_sstate. */
bool cg_timing_begin(void *be, void *stream, uint64_t key, bool graph);
void cg_timing_end(void *be, void *stream, bool ok);
/* Read the samples whose events have completed, never waiting, and give each eager/graph pair
 * to the engine (cg_stream_timing). Call with s's lock held, outside engine calls; cheap when
 * nothing is in flight. */
void cg_timing_read(struct cg_sstate *s);
/* Any stream has samples in flight. */
bool cg_timing_due(void);
/* The stream record is going away: its events and samples (cg_backend_forget_stream). */
void cg_timing_free(struct cg_sstate *s);

#endif
