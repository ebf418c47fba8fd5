/* The policy engine: per stream, learn which runs of ops repeat, build one graph per repeating
 * chunk, and during replay defer matching ops until a chunk is complete, then launch it with
 * exactly the changed arguments patched in. Pure C; reaches the driver only via backend.h.
 *
 * Threading: a cg_stream is used by one thread at a time (the shim holds a per-stream lock
 * around every call). Engine-wide state (graph count, statistics) is atomic. */
#ifndef CG_POLICY_ENGINE_H
#define CG_POLICY_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "policy/backend.h"
#include "policy/reason.h"
#include "policy/records.h"

void cg_engine_config_default(struct cg_engine_config *cfg);
/* The host time (us) that graph launches running `ops` ops in `graph_launches` launches saved
 * by those costs (not below 0): what the cost gate, the deferral controller and the report
 * count as the launch time graphs take off the host. */
double cg_engine_launch_saved_us(const struct cg_engine_config *cfg, double ops,
                                 double graph_launches);

struct cg_engine;
struct cg_stream;

struct cg_engine *cg_engine_new(const struct cg_engine_config *cfg,
                                const struct cg_backend *be, void *be_ctx);
/* Destroys every graph (through backend->destroy unless `driver_gone`) and frees everything. */
void cg_engine_free(struct cg_engine *e, bool driver_gone);

/* `be_stream` is handed back to the backend untouched; `id` names the stream in events. */
struct cg_stream *cg_stream_new(struct cg_engine *e, void *be_stream, uint64_t id);
/* Flushes pending work (reason EXIT unless given), destroys the stream's graphs. */
void cg_stream_free(struct cg_stream *s, enum cg_reason why);

enum cg_verdict {
	CG_PASS,   /* the caller must submit this op itself, now (the engine flushed before it) */
	CG_TAKEN,  /* the engine owns the op (deferred or launched in a graph); caller returns success */
};

/* One op on this stream. Copies what it keeps (args, and sig while learning). */
enum cg_verdict cg_submit(struct cg_stream *s, const struct cg_op *op);

/* The program made a boundary call ordered on this stream (sync, host copy, event record, ...):
 * submit everything pending (as a graph when it is exactly a complete chunk), and end the
 * current chunk here so that learning aligns chunks with the program's own boundaries. */
void cg_boundary(struct cg_stream *s, enum cg_reason why);

/* An op the caller forwarded (and counts) itself right after a boundary, as it must (a kernel
 * launched with a shape the driver has not accepted in its context yet): never deferred, it
 * still counts among the stream's ops and, where the driver ran it (`ran`), starts the chunk
 * being learned, so that the iteration it came in holds the same ops and chunks as the next ones
 * and the loop is found where it begins. */
void cg_passed(struct cg_stream *s, const struct cg_op *op, bool ran);

/* Submit pending work now without ending the chunk position for learning purposes (used by the
 * timeout flusher and by observers on other threads). Returns true if anything was pending. */
bool cg_flush(struct cg_stream *s, enum cg_reason why);

/* Nothing happened on the stream since its last boundary (or since it was made): another
 * boundary now would change nothing but a count, so the shim may skip the engine for it (the
 * waits of such boundaries still go to cg_engine_note_wait). Call with the lock held. */
bool cg_stream_settled(const struct cg_stream *s);
/* The same in one call, with the step between: QUIET is settled but for a chunk launched at the
 * last boundary that the next wait (a sync, a copy to the host) is still to mark, so that a
 * boundary that is not a wait would change nothing but counts; BUSY, a boundary would cut or
 * submit something. Call with the lock held. */
enum cg_calm { CG_BUSY, CG_QUIET, CG_SETTLED };
enum cg_calm cg_stream_calm(const struct cg_stream *s);
/* The host waited for the GPU (the controller's intervals end there); lock-free. */
void cg_engine_note_wait(struct cg_engine *e);

/* Cheap checks for the shim's hot paths and the flusher (no lock needed to read). */
bool cg_stream_pending(const struct cg_stream *s);
/* The pending work is only held back for a cost-gate sample of a chunk being learned (it would
 * have passed otherwise): the shim flushes it, where for deferred work it would also make a
 * boundary that only pending work calls for (stream ordering). Call with the lock held. */
bool cg_stream_held(const struct cg_stream *s);
/* Monotonic ns at which the oldest pending op was deferred (0 when none), read from the clock
 * given to cg_engine_set_clock (default CLOCK_MONOTONIC); set it before creating streams. */
uint64_t cg_stream_pending_since(const struct cg_stream *s);
/* This stream's deferral budget now (ns; 0: the shim's own). */
uint64_t cg_stream_defer_budget_ns(const struct cg_stream *s);
void cg_engine_set_clock(struct cg_engine *e, uint64_t (*now_ns)(void));
/* Now, by that clock: what the shim compares cg_stream_pending_since with. */
uint64_t cg_engine_now(const struct cg_engine *e);

/* Feedback from the backend: one GPU timing sample of a chunk (its key, as CG_EV_GRAPH_BUILT
 * gives it), its ops run eagerly or (`graph`) its graph, `us` long. By the least of 3 graph
 * samples and of its eager ones (1 at warmup 2, 2 from 3), a chunk whose graph takes more GPU
 * time than its eager ops by more than the samples' noise AND the host time the graph saves is
 * disabled for good (reason COST_GATE):
 * eager samples are submitted in a burst, so they measure the GPU alone, while a graph's gain is
 * on the host. A chunk launched where the host then waits (SYNC, HOST_COPY boundaries) whose
 * graph's GPU time exceeds that saving is disabled too (EXPOSED; 3 graph samples), weighed by
 * the share of its runs the host waited for. Eager samples come from the chunk's learning
 * sightings between its first and the one that earns its graph (with a warmup over 2), which run
 * eagerly anyway; where those gave fewer, from occurrences not replayed (COST_SAMPLE), only for
 * a graph over that saving and the noise in the least of two samples, with nodes enough to fall
 * that far behind its eager ops (samples.c, cg_gate_plausible). A chunk whose graph takes under
 * half the host time it saves can be neither, and is sampled no more. Call with the stream's
 * lock held. */
void cg_stream_timing(struct cg_stream *s, uint64_t chunk_key, bool graph, double us);

/* The counters (records.h) summed over every stream, freed ones included. */
void cg_engine_stats(const struct cg_engine *e, struct cg_stats *out);

/* The (at most) `max` sites seen most often, most frequent first; returns how many. */
uint32_t cg_engine_divergence_sites(const struct cg_engine *e, struct cg_divergence_site *out,
                                    uint32_t max);

/* Where the deferral controller stands, for the report. */
void cg_engine_control(const struct cg_engine *e, struct cg_control_summary *out);

#endif
