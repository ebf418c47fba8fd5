/* What the engine's files share, internal to policy/: the engine and its streams (their
 * state), and a stream's primitives (stream.c), which the state machine (engine.c) and the
 * cost gate's samples (samples.c) build on: events and fallbacks, places, the current chunk,
 * graphs, learning a chunk. None of them calls up into those two files. */
#ifndef CG_POLICY_STREAM_H
#define CG_POLICY_STREAM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "policy/backend.h"
#include "policy/chunk.h"
#include "policy/control.h"
#include "policy/gate.h"
#include "policy/loop.h"
#include "policy/records.h"
#include "policy/assert.h"

#define CG_SITES 32           /* divergence sites kept (the report shows the most frequent) */
#define CG_SPLITS 64  /* places a stream cuts anew (cg_cut_exposed, cg_cut_variant), at most */
#define CG_LEARN_FIRST 64     /* learning chunks a stream finds by their first op: slots */
#define CG_LEARN_WAYS 4       /* of this many chunks each, the latest cut first (a loop's chunks
                                 may begin with the same op: its layers, a step's two halves) */

struct cg_engine {
	struct cg_engine_config cfg;
	struct cg_gate_costs gate;  /* the cost gate's view of cfg */
	cg_realloc_fn mem;
	uint32_t chunk_min;
	uint64_t cdc_below;     /* cut where (hash >> 32) < cdc_below: probability 1 / cdc_mod */
	const struct cg_backend *be;
	void *be_ctx;
	uint64_t (*now_ns)(void);
	uint64_t graphs_alive;  /* atomic: all streams build against max_graphs */
	pthread_mutex_t lock;   /* guards the stream list, `retired` and `sites` */
	struct cg_stream *streams;
	struct cg_stats retired; /* counters of freed streams */
	struct cg_divergence_site sites[CG_SITES];  /* (count 0: free) */
	/* The deferral controller (control.h), guarded by ctl_lock; the hot path reads only the
	 * atomics below it. */
	pthread_mutex_t ctl_lock;
	struct cg_control ctl;
	uint64_t ctl_base;       /* all streams' ops (st.ops, retired included) before the
	                            current interval began; under ctl_lock */
	uint64_t ctl_wait_ns;    /* atomic: the latest wait for the GPU since (0: none) */
	bool ctl_defer;          /* atomic: ctl.defer */
	bool ctl_probing;        /* atomic: ctl.phase == CG_CTL_PROBE */
	bool launched;           /* atomic: a graph has been launched */
	uint64_t timed;          /* atomic: runs timed for the cost gate so far */
	uint64_t ctl_timed;      /* `timed` when the controller last looked */
	uint64_t built;          /* atomic: graphs built so far (each costs its build once) */
	uint64_t ctl_built;      /* `built` when the controller last looked */
};

/* What a stream does with its current chunk (`sc`): the state machine's state. One function
 * changes it (cg_set_mode, stream.c), which checks what each mode needs on entry; the data of a
 * mode is written by that mode's file, and cleared when the stream leaves the mode. */
enum cg_mode {
	CG_MODE_LEARNING,       /* sc ran eagerly (or its caller runs its ops) and is learned */
	CG_MODE_HOLDING,        /* sc is held back, a prefix of the learning chunk `hold`, to
	                           run as the graph it earns or as an eager sample (samples.c,
	                           pieces.c) */
	CG_MODE_DEFERRING,      /* sc is deferred, a prefix of every candidate (replay.c) */
	CG_MODE_DEFERRING_REST, /* sc is deferred as the ops of `rest.chunk` from `rest.at` on, the
	                           part of an armed chunk after a boundary that cut it (pieces.c) */
};

/* CG_MODE_DEFERRING (replay.c): the armed chunks the deferred ops may still become. */
struct cg_defer {
	struct cg_chunk **cand;
	uint32_t ncand, cap;
	struct cg_chunk *complete;  /* the candidate sc equals exactly, if any */
	struct cg_chunk *expect;    /* the candidate that ran at this place before (places) */
};

/* An armed chunk a boundary cut short, and how many of its ops came before the boundary. */
struct cg_rest {
	struct cg_chunk *chunk;
	uint32_t at;
};

/* How the backend took the learning samples ops were held for (samples.c, in every mode). */
struct cg_samples {
	uint32_t declined;          /* learning samples the backend declined in a row */
	uint32_t skip;              /* chunk starts to let pass before holding one again */
};

struct cg_stream {
	struct cg_engine *e;
	void *be_stream;
	uint64_t id;
	uint64_t op_index;          /* ops submitted on this stream so far */
	/* the current chunk, in every mode */
	uint64_t chunk_first;       /* op index of the current chunk's first op */
	struct cg_scratch sc;
	enum cg_reason why;         /* why the learning chunk runs eagerly (NONE: decided at the cut) */
	uint32_t passed;            /* ops of the learning chunk the caller submitted itself */
	/* the mode and its data */
	enum cg_mode mode;
	struct cg_defer defer;      /* CG_MODE_DEFERRING */
	struct cg_rest rest;        /* CG_MODE_DEFERRING_REST */
	struct cg_chunk *hold;      /* CG_MODE_HOLDING (samples.c): the learning chunk held for */
	struct cg_samples samples;
	struct cg_rest cut_short;   /* set by a boundary for the op right after it: the armed chunk
	                               the boundary cut short (chunk NULL: none), whose rest that op
	                               may start */
	struct cg_chunk *learn_first[CG_LEARN_FIRST][CG_LEARN_WAYS];  /* learning chunks, by their
	                                                                 first op */
	/* places: which chunk ran where */
	uint64_t place;             /* where the current chunk runs (0: unknown) */
	bool place_unsure;          /* a flush cut the current chunk, not the program */
	const struct cg_chunk *eager_place;  /* the chunk of this place, running eagerly */
	struct cg_places places;
	/* where chunks are cut */
	uint32_t len_max;           /* chunks are cut at this length (cfg.chunk_max, or less once
	                               a short loop had a chunk exposed) */
	/* Where chunks are cut anew: after split_n[i] ops, where those ops are the first half of an
	 * exposed chunk (cg_cut_exposed) or the ops before a variant that runs eagerly for good
	 * (cg_cut_variant); their chunk key is split_key[i]. */
	uint64_t split_key[CG_SPLITS];
	uint32_t split_n[CG_SPLITS];
	uint32_t nsplit;
	uint32_t diverged_at;       /* the learning chunk began with this many deferred ops that
	                               diverged (0: it did not) */
	struct cg_loop per;         /* where this stream's loop is cut */
	bool length_cut;            /* the chunk being cut reached its longest (not pinned) */
	struct cg_chunk *cut_before;  /* the learning chunk that content cut right before the
	                               current one (NULL: the latest cut was of another kind): a
	                               short loop's first unit can begin inside it */
	uint64_t cut_before_end;    /* op index just after its last op */
	/* boundaries and replays */
	uint64_t tick;              /* LRU clock */
	uint64_t epoch;             /* program boundaries so far: instance positions restart */
	uint64_t just_launched;     /* key of the chunk that ran with no op after it yet (0: none) */
	bool at_boundary;           /* no op since the last boundary (or since it was made) */
	/* the deferral budget (replay.c) */
	uint32_t timeouts;          /* deferrals that hit the budget */
	uint64_t budget_ns;         /* atomic: the deferral budget (0: the shim's own) */
	uint64_t budget_peak;       /* longest deferral that completed, over budget_runs */
	uint32_t budget_runs;
	struct cg_index ix;
	struct cg_op *ops;          /* [chunk_max]: a chunk handed to backend->build */
	uint8_t fallback_events[CG_R_COUNT];
	uint64_t pending_since;     /* atomic: the flusher reads it without the stream lock; non-zero
	                               exactly while the mode is not CG_MODE_LEARNING */
	struct cg_stats st;         /* one writer (the lock holder), read by cg_engine_stats */
	uint64_t ctl_next;          /* st.ops at which control_op (engine.c) next counts every
	                               stream's ops */
	struct cg_stream *prev, *next;
};

/* The state machine's one transition (stream.c): leaves the current mode (its data cleared;
 * for CG_MODE_LEARNING no work is pending any more) and enters `to` (work pending from now, for
 * the other modes), checking in debug builds what `to` needs on entry. */
void cg_set_mode(struct cg_stream *s, enum cg_mode to);

/* Counters are single-writer: a relaxed load and store (no locked instruction on the hot path)
 * keeps concurrent reads from cg_engine_stats well-defined. */
static inline void stat_add(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + v, __ATOMIC_RELAXED);
}
#define ST(s, field, v) stat_add(&(s)->st.field, (v))

/* ---- events and reasons */
/* Hand an event to the backend (the report), stamped with the stream. */
void cg_emit(struct cg_stream *s, struct cg_event ev);
/* Building a graph of the chunk failed (`detail`: the backend's word on it). */
void cg_emit_build_failed(struct cg_stream *s, const struct cg_chunk *t, const char *detail);
/* `n` ops ran eagerly because of `r`: counted, and the first few of each reason reported. */
void cg_fallback(struct cg_stream *s, enum cg_reason r, uint32_t n, bool report,
                 struct cg_event ev);

/* ---- places: which chunk ran where */
/* The current chunk ended as `t` (NULL: no template). */
void cg_chunk_ended(struct cg_stream *s, struct cg_chunk *t);
/* Does the learning chunk end here, where the chunk of its place ends? */
bool cg_place_chunk_ends(struct cg_stream *s, const struct cg_op *op, uint64_t hash);

/* ---- the current chunk */
void cg_push_op(struct cg_stream *s, const struct cg_op *op, uint64_t hash);
void cg_chunk_reset(struct cg_stream *s);
/* Submit the deferred ops eagerly, in order; they stay as the start of a learning chunk. */
void cg_run_deferred(struct cg_stream *s);
/* The same, counted as fallbacks of reason `r`. */
void cg_submit_deferred(struct cg_stream *s, enum cg_reason r, struct cg_event ev);
/* The ops held for a learning sample run eagerly now (all, or all but the latest). */
void cg_release_hold(struct cg_stream *s, bool keep_last);

/* ---- graphs */
void cg_destroy_instances(struct cg_stream *s, struct cg_chunk *t, bool driver_gone);
/* The chunk runs eagerly for good, for reason `r` (`cost`: the timing that decided, or NULL). */
void cg_disable_costed(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r,
                       const struct cg_chunk_cost *cost);
void cg_disable(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r);
/* A graph API failed for the chunk: back off, and give up after the configured failures. */
void cg_chunk_failed(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r);
/* A slot under max_graphs, evicting this stream's least recently launched graph if need be. */
bool cg_reserve_graph(struct cg_stream *s, const struct cg_chunk *keep);
/* Build the chunk's graph from the occurrence in the scratch: NONE, or why it has none. */
enum cg_reason cg_build_graph(struct cg_stream *s, struct cg_chunk *t, const char **detail);

/* ---- learning */
/* One more eager occurrence of `t`, its content seen `sightings` times: advance its state. */
enum cg_reason cg_learned(struct cg_stream *s, struct cg_chunk *t, uint32_t sightings,
                          const char **detail);
/* End the learning chunk: find or add its template (`learn_it`), count its eager ops. Returns
 * the template (NULL: none). */
struct cg_chunk *cg_cut(struct cg_stream *s, bool learn_it, bool latest);
/* The learning chunk's occurrence is over, learned as `t` (NULL: not learned): its passed ops
 * are counted under `r` (or the chunk's own reason), the place noted, the scratch emptied. */
void cg_learning_ended(struct cg_stream *s, struct cg_chunk *t, enum cg_reason r,
                       const char *detail);

#endif
