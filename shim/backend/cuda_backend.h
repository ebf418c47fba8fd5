/* The real-driver backend of the policy engine (policy/backend.h): eager submission of recorded
 * ops, chunk graphs built by capturing the ops on a private stream (on an executable of their own,
 * or one they share with other chunks of the stream), node patches, launches. */
#ifndef CG_SHIM_CUDA_BACKEND_H
#define CG_SHIM_CUDA_BACKEND_H

#include <cuda.h>
#include <stdint.h>
#include "policy/backend.h"

struct cg_sstate;

extern const struct cg_backend cg_cuda_backend;

/* The stream record is going away: release the backend's resources for it (with a per-thread
 * stream's proxy and events, ptds.h). */
void cg_backend_forget_stream(struct cg_sstate *s);

/* Device memory cugraft's instantiated graphs hold now and held at most (bytes): what the free
 * memory the driver reports dropped by at each instantiation, an estimate. */
void cg_backend_graph_memory(uint64_t *now, uint64_t *peak);
/* Host time spent in the graph API so far (ns), every stream's: what learning a chunk cost the
 * program once it has a graph, and what its replays cost instead of the launch calls they
 * spare (patching the nodes whose arguments changed, launching the graphs). And the deferred
 * or held ops submitted eagerly after all (a divergence, a flush at a wait or a timeout, a
 * cost-gate sample): their host time in the driver and how many. */
struct cg_backend_host_time {
	uint64_t build_ns, patch_ns, launch_ns, flush_ns, flush_ops;
	uint64_t capture_ns;  /* of build_ns: capturing the ops and reading their nodes */
};
void cg_backend_host_time(struct cg_backend_host_time *out);
/* Chunk graphs on shared executables (cuda_backend.c): executables instantiated, graphs built
 * onto another chunk's executable instead, launches that switched an executable over to another
 * graph (every node patched), and graphs that got an executable of their own later. */
struct cg_backend_execs {
	uint64_t made, joined, switches, bought;
};
void cg_backend_execs(struct cg_backend_execs *out);

#endif
