/* Per-thread default streams (CU_STREAM_PER_THREAD, or 0 in the _ptsz entry points). Only their
 * own thread can name one: another thread naming it reaches its own. Work deferred on one must
 * still reach the GPU when its thread stops submitting (the flusher) or when another thread must
 * see it (a flush by an observer, the legacy stream's ordering). So:
 *  - while work is deferred, the owner keeps a `fence` event recorded after everything it has
 *    submitted to the stream (one event record each time deferral starts again);
 *  - another thread submits the deferred work on the stream's `proxy`, a private blocking stream
 *    of the same context, after making the proxy wait for the fence, and records `handback` on
 *    the proxy after it;
 *  - the owner's next call that reaches the stream (an op, a boundary, a flush) first makes the
 *    stream wait for `handback` ("catching up").
 * Context-wide syncs cover the proxy; being blocking, it keeps the legacy stream's ordering.
 * Every function takes the stream's lock held, except cg_ptds_open (registry lock). */
#ifndef CG_SHIM_PTDS_H
#define CG_SHIM_PTDS_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "shim/context/sstate.h"

/* Redirects the owners have not caught up with yet (a cheap check for whole-process flushes). */
extern atomic_int cg_ptds_outstanding;

/* On the owner thread, its context current: create the proxy and events. false: they could not
 * be made; the stream's work then runs eagerly. */
bool cg_ptds_open(struct cg_sstate *s);
void cg_ptds_close(struct cg_sstate *s);
/* Says once (stderr, report note) that a per-thread stream runs eagerly for want of a proxy. */
void cg_ptds_note_eager(void);

/* Where this thread submits the stream's work now (the owner: the stream itself, after catching
 * up; another thread: the proxy). NULL: nowhere (a failed driver call). */
CUstream cg_ptds_target(struct cg_sstate *s);

/* The owner, before it uses the stream in any way: wait for work redirected to the proxy. */
void cg_ptds_catch_up(struct cg_sstate *s);

/* After every engine call (any thread): finish a redirect; keep the fence while work is
 * pending. false: the fence could not be recorded, so no other thread could reach the pending
 * work: the caller must submit it now. */
bool cg_ptds_settle(struct cg_sstate *s, bool pending);

#endif
