/* What the shim tells the report: engine events (first occurrences, rate-limited), boundary
 * counts by kind, the header line and the closing summary. */
#ifndef CG_SHIM_EVENTS_H
#define CG_SHIM_EVENTS_H

#include <cuda.h>

#include "policy/engine.h"

/* backend->event: called with the stream's lock held. */
void cg_events_engine(void *be, const struct cg_event *ev);
/* A boundary the program made (counted by kind for the summary). */
void cg_events_boundary(enum cg_reason why);
/* An op that ran eagerly without reaching the engine (ungraphable, out of scope, per-thread
 * stream, inside the program's capture): counted with the engine's fallbacks in the summary. */
void cg_events_bypass(enum cg_reason why);
void cg_events_header(void);
/* A stream of context `ctx` was seen: its device is named in the summary's `devices` (the
 * header is written before the program picks a device). */
void cg_events_device(CUcontext ctx);
/* nccl.c: the summary's "collectives":{name: calls}; the loaded libnccl's version code (0: none). */
struct cg_json;
void cg_nccl_json(struct cg_json *j);
int cg_nccl_version(void);
void cg_events_summary(void);
/* Where the program has no handler of its own: SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL and
 * SIGTERM leave a {"event":"signal"} record in the report before the process dies. */
void cg_events_catch_fatal(void);

#endif
