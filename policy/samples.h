/* The cost gate's samples (samples.c): which runs of a chunk are timed, the learning sightings
 * held (for an eager sample, or to run as the graph they earn), and where the chunks its verdicts
 * keep eager make the stream cut anew (an exposed chunk in two, the ops before a variant).
 * Internal to policy/. */
#ifndef CG_POLICY_SAMPLES_H
#define CG_POLICY_SAMPLES_H

#include "policy/stream.h"

enum timing { UNTIMED, TIME_EAGER, TIME_GRAPH };

/* The cost gate's view of the engine's configuration. */
struct cg_gate_costs cg_gate_costs_of(const struct cg_engine_config *cfg);
/* Whether this run of armed chunk `t` is to be timed, and how. */
enum timing cg_timing_wanted(struct cg_stream *s, struct cg_chunk *t);
/* A timed eager run of the deferred ops, which are exactly `t`. False: the backend declined. */
bool cg_eager_sample(struct cg_stream *s, struct cg_chunk *t);
/* At a chunk start no armed chunk takes: hold the ops back where the sighting earns the chunk
 * its graph or the chunk wants a learning sample. */
void cg_start_hold(struct cg_stream *s, const struct cg_op *op, uint64_t hash, uint64_t here);
/* The next op while ops are held: true where it is held too (it continues the chunk held for,
 * or another learning chunk worth holding begins with the held ops and it); else the held ops
 * have run eagerly and the stream learns on. */
bool cg_hold_takes(struct cg_stream *s, const struct cg_op *op, uint64_t hash);
/* The held ops are the chunk held for: run them in a timed burst. */
void cg_learn_sample(struct cg_stream *s);
/* Is the chunk learned so far cut anew here (an exposed chunk's first half, the ops before a
 * variant that runs eagerly for good)? Never in a short loop cut in units. */
bool cg_split_here(const struct cg_stream *s);
/* Chunk `t` is exposed: it is to be learned again in two parts. */
void cg_cut_exposed(struct cg_stream *s, const struct cg_chunk *t);
/* Deferred ops diverged after `at` of them into `t`, which runs eagerly for good: those ops are
 * to be a chunk of their own. */
void cg_cut_variant(struct cg_stream *s, const struct cg_chunk *t, uint32_t at);

#endif
