/* The only way the policy engine reaches a driver: a table of callbacks. The shim gives the
 * real-driver backend (shim/backend/cuda_backend.c); tests give a recording fake (tests/unit). Every call
 * returns 0 or a negative errno-style code; `detail` (may be NULL) receives a static string
 * naming the failing API result (e.g. "CUDA_ERROR_OUT_OF_MEMORY") for the report. */
#ifndef CG_POLICY_BACKEND_H
#define CG_POLICY_BACKEND_H

#include <stdbool.h>
#include "op.h"

struct cg_event;

struct cg_backend {
	/* Submit one op eagerly on the stream, exactly as recorded. */
	int (*eager)(void *be, void *stream, const struct cg_op *op, const char **detail);
	/* Build one graph holding ops[0..n) in order, with these argument bytes, ready to launch.
	 * `share`: the chunk's arguments changed at most of its ops from run to run (or no two runs
	 * were compared), so the graph may run on an executable it shares with other graphs of the
	 * stream (see claim). *graph receives the backend's handle. Nothing runs. */
	int (*build)(void *be, void *stream, const struct cg_op *ops, uint32_t n, bool share,
	             void **graph, const char **detail);
	/* Optional (may be NULL: every graph keeps its arguments): before the patches and the
	 * launch of a graph. 0: it holds the arguments last patched into it (or built with);
	 * 1: it holds others (its executable last ran another graph), every node must be patched;
	 * negative: it cannot run. */
	int (*claim)(void *be, void *graph, const char **detail);
	/* Replace the argument bytes of node `index` (the index-th op given to build) with
	 * op->args. op->sig equals the sig the graph was built with. */
	int (*patch)(void *be, void *graph, uint32_t index, const struct cg_op *op, const char **detail);
	/* Launch the graph on the stream. */
	int (*launch)(void *be, void *stream, void *graph, const char **detail);
	/* Free the graph. Never fails visibly. */
	void (*destroy)(void *be, void *graph);
	/* Optional (may be NULL): an event worth reporting (region armed, graph built, fallback
	 * first occurrences, chunk disabled). Called with the stream's lock held: no blocking. */
	void (*event)(void *be, const struct cg_event *ev);
	/* Optional (may be NULL): GPU timing for the cost gate. time_begin comes right before one
	 * run of chunk `chunk_key` reaches the stream (`graph`: its graph, else its ops eagerly) and
	 * says whether the backend samples it; if so, time_end follows right after the run (`ok`
	 * false: it failed, drop the sample). Samples come back later, outside any engine call,
	 * through cg_stream_timing. Called with the stream's lock held: no blocking. */
	bool (*time_begin)(void *be, void *stream, uint64_t chunk_key, bool graph);
	void (*time_end)(void *be, void *stream, bool ok);
};

#endif
