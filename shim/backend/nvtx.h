/* NVTX ranges and marks of cugraft's own work (CUGRAFT_NVTX=1), in the NVTX domain "cugraft",
 * on the thread that submits the work, so that Nsight Systems shows them above the kernels:
 * each graph replay, each flush with its reason, graph builds and learned chunks, fallbacks and
 * the controller's decisions (docs/nvtx.md). Off by default: no NVTX call is then made, so no
 * tool's injection library is ever loaded, and every hook below costs one predictable branch;
 * the same where it is on but no tool is attached. */
#ifndef CG_SHIM_NVTX_H
#define CG_SHIM_NVTX_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/op.h"
#include "policy/reason.h"

struct cg_event;

/* Start-up: reads CUGRAFT_NVTX and, where it is on, starts NVTX (which loads the tool's
 * injection library); marking stays off where no tool is attached. Without it, the first hook
 * does the same. */
void cg_nvtx_start(void);
/* -1: not started yet, 0: off (or no tool attached), 1: on. */
extern int cg_nvtx_state;
bool cg_nvtx_resolve(void);
static inline bool cg_nvtx_on(void)
{
	int s = __atomic_load_n(&cg_nvtx_state, __ATOMIC_RELAXED);
	return __builtin_expect(s != 0, 0) && (s > 0 || cg_nvtx_resolve());
}

/* Only when cg_nvtx_on(). Ops that ran eagerly are marked "eager <reason> ops=N" with the
 * reasons and counts of the report's "fallbacks": each engine call that may submit or count them
 * ends by marking what the engine's counters gained since the last such mark, on the thread that
 * made the call (whichever call sees a gain first marks it once: the marks add up to the
 * summary's counts). A flush of a stream's pending work (a boundary, the flusher, another
 * thread, exit) is the range "flush <reason>" (`range`: work was pending), holding its replays
 * and that mark. */
void cg_nvtx_flush_begin(enum cg_reason why, bool range);
void cg_nvtx_flush_end(void);
/* The engine's verdict on a launch: it may submit a diverging chunk's ops, or count ops it
 * passed (`passed`: this one) when their chunk ends. */
void cg_nvtx_submit_begin(void);
void cg_nvtx_submit_end(bool passed);
/* An op that ran eagerly without reaching the engine (events.h). */
void cg_nvtx_bypass(enum cg_reason why);
/* The backend: `n` ops submitted eagerly, counted towards the enclosing flush or submit. */
void cg_nvtx_eager(uint32_t n);
/* The backend: the range "learn build ops=N" around building one graph of ops[0..n); returns
 * the graph's content (its ops' hashes folded), by which its replays are named. */
uint64_t cg_nvtx_build_begin(const struct cg_op *ops, uint32_t n);
void cg_nvtx_build_end(void);
/* The backend: the range "replay chunk=<key> ops=N patches=P" around one graph launch; the key
 * is the one the engine gave (GRAPH_BUILT) for the first graph of that content, so every
 * instance of a chunk carries it ("chunk=?" where none came). */
void cg_nvtx_replay_begin(uint64_t content, uint32_t ops, uint32_t patches);
void cg_nvtx_replay_end(void);
/* An engine event (events.c): marks for learned chunks ("learn chunk=<key> ops=N"), graphs
 * built, chunks disabled or evicted, reported fallbacks and the controller's decisions. */
void cg_nvtx_event(const struct cg_event *ev);

#endif
