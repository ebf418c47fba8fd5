/* Chunk templates and the per-stream index over them. A template holds one learned chunk: its
 * ops' signatures, the argument bytes its graph holds (before it has one: those of its latest
 * occurrence), and which argument words changed during warmup. Internal to policy/. */
#ifndef CG_POLICY_CHUNK_H
#define CG_POLICY_CHUNK_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "policy/op.h"
#include "policy/reason.h"

typedef void *(*cg_realloc_fn)(void *p, size_t n);

/* The chunk being learned or deferred on a stream: its ops, copied at submit time (the
 * program's parameter memory is usually its stack). */
struct cg_scratch {
	uint32_t n;
	bool lossy;          /* a copy failed: only hashes were kept, this chunk is not learned */
	uint64_t key;        /* running mix of the op hashes */
	uint64_t *hash;      /* [chunk_max] */
	uint32_t *sig_off, *sig_len, *args_off, *args_len;
	const char **name;
	unsigned char *bytes;
	size_t used, cap;
};

enum cg_chunk_state {
	CG_CHUNK_LEARNING,  /* seen fewer than warmup times */
	CG_CHUNK_IDLE,      /* learned but no graph: not built yet, evicted, or refused (max_graphs) */
	CG_CHUNK_ARMED,     /* has a graph and is indexed by its first op */
	CG_CHUNK_BACKOFF,   /* a graph API failed: skipping `skip` occurrences before rebuilding */
	CG_CHUNK_DISABLED,  /* eager for good */
};

struct cg_chunk {
	uint64_t key;
	uint32_t n;
	enum cg_chunk_state state;
	enum cg_reason why;       /* BACKOFF, DISABLED: why its occurrences run eagerly */
	uint32_t seen, fails, skip;
	uint32_t timeouts;             /* deferrals that hit the budget before it completed */
	uint64_t launched;             /* graph launches */
	void *graph;                   /* instance 0 (its held arguments are `args`) */
	/* A chunk can recur several times between two program boundaries (identical layers, a
	 * loop of one kernel): its k-th occurrence since the last boundary uses instance k, whose
	 * graph already holds the arguments of that position, so few nodes need patching. */
	uint32_t ninst;                /* instances with a graph: graph, then xgraph[0..ninst-1) */
	uint32_t occ;                  /* occurrences since boundary epoch occ_epoch */
	uint64_t occ_epoch;
	void **xgraph;
	unsigned char *xargs;          /* held arguments of the extra instances, args bytes each */
	uint64_t last_used;       /* stream tick of its last build or launch, for LRU eviction */
	/* GPU time of the cost gate's samples read back: the least of each kind, since a sample
	 * can only come out longer than the work (other streams' kernels running alongside, a
	 * GPU not yet at its clocks), never shorter */
	double eager_us, graph_us;
	uint32_t eager_n, graph_n;     /* and how many */
	uint8_t timed_eager, timed_graph, timing_asks;  /* runs sampled for the cost gate, asks */
	uint8_t learn_samples;         /* of timed_eager: taken at learning sightings */
	bool timing_done;              /* the samples so far settle the cost gate's decision */
	uint64_t timed_at;             /* `launched` when its latest sample was taken */
	uint64_t retimed_at;           /* `launched` when its graph was last timed afresh (0: never;
	                                  samples.c) */
	uint8_t retimes;               /* how often: its eager samples are of its work before */
	double graph_before_us;        /* graph_us, when it was last timed afresh */
	uint64_t waits;                /* runs the host waited for right after (a sync, a copy to
	                                  the host): each exposes the chunk's GPU time */
	double span_us;                /* host time from a deferred run's first op to its graph's
	                                  launch, summed over its first CG_SPAN_RUNS graph runs */
	uint32_t span_n;
	uint32_t ends;                 /* times it ended since epoch ends_epoch: which place follows */
	uint64_t ends_epoch;
	struct cg_chunk *armed_next;   /* next armed chunk whose first op has the same hash */
	uint64_t *hash;                /* [n] */
	uint64_t *changed;             /* [n] bit w: argument word w changed during warmup (the
	                                  last bit stands for every word from 63 on) */
	uint32_t args_seen;            /* learning occurrences whose arguments it noted (changed
	                                  compares the second on with the one before) */
	const char **name;             /* [n] */
	uint32_t *sig_off, *args_off;  /* [n + 1] */
	unsigned char *sig, *args;
};

/* Does the op equal op i of the template, as far as a graph node's reuse goes? The argument
 * length is part of it so that held arguments can be compared and patched in place. */
static inline bool cg_chunk_op_matches(const struct cg_chunk *t, uint32_t i, const struct cg_op *op,
                                       uint64_t hash)
{
	return t->hash[i] == hash && t->sig_off[i + 1] - t->sig_off[i] == op->sig_len &&
	       t->args_off[i + 1] - t->args_off[i] == op->args_len &&
	       memcmp(t->sig + t->sig_off[i], op->sig, op->sig_len) == 0;
}

/* Are `prefix`'s ops the first ops of `t`? */
static inline bool cg_chunk_begins(const struct cg_chunk *t, const struct cg_chunk *prefix)
{
	if (prefix->n > t->n)
		return false;
	for (uint32_t i = 0; i < prefix->n; i++) {
		struct cg_op op = { .sig = prefix->sig + prefix->sig_off[i],
		                    .sig_len = prefix->sig_off[i + 1] - prefix->sig_off[i],
		                    .args_len = prefix->args_off[i + 1] - prefix->args_off[i] };
		if (!cg_chunk_op_matches(t, i, &op, prefix->hash[i]))
			return false;
	}
	return true;
}

static inline uint32_t cg_chunk_bytes(const struct cg_chunk *t)
{
	return t->sig_off[t->n] + t->args_off[t->n];
}

/* Learned chunks of one stream: by content (key, then bytes) and, for the armed ones, by the
 * hash of their first op. Both tables only grow; chunks live as long as the stream. */
struct cg_index {
	cg_realloc_fn mem;
	struct cg_chunk **by_key;
	uint32_t key_mask, nchunks;
	struct cg_first {
		uint64_t hash;             /* 0: empty slot (op hashes are never 0) */
		struct cg_chunk *armed;    /* chain through armed_next */
	} *by_first;
	uint32_t first_mask, nfirst;
};

bool cg_scratch_init(struct cg_scratch *sc, uint32_t chunk_max, cg_realloc_fn mem);
void cg_scratch_fini(struct cg_scratch *sc, cg_realloc_fn mem);
/* Make room for `bytes` more signature and argument bytes. */
bool cg_scratch_reserve(struct cg_scratch *sc, size_t bytes, cg_realloc_fn mem);
/* Append an op (the caller checked n < chunk_max). A failed copy only makes the chunk lossy. */
void cg_scratch_push(struct cg_scratch *sc, const struct cg_op *op, uint64_t hash, cg_realloc_fn mem);
void cg_scratch_op(const struct cg_scratch *sc, uint32_t i, struct cg_op *out);
uint64_t cg_scratch_key(const struct cg_scratch *sc);
/* The key a scratch holding the chunk's first m ops would have (m <= n). */
uint64_t cg_chunk_prefix_key(const struct cg_chunk *t, uint32_t m);
void cg_scratch_reset(struct cg_scratch *sc);
/* Put the last k ops of `t` (with the arguments it holds) before the scratch's ops; the scratch
 * has room for them (n + k <= its chunk_max). False: out of memory, the scratch unchanged. */
bool cg_scratch_prepend(struct cg_scratch *sc, const struct cg_chunk *t, uint32_t k,
                        cg_realloc_fn mem);
/* Forget the first k ops (k < n): the rest is the chunk, with the key it would have had. */
void cg_scratch_drop_front(struct cg_scratch *sc, uint32_t k);

bool cg_index_init(struct cg_index *ix, cg_realloc_fn mem);
/* Frees every chunk; their graphs must be gone already. */
void cg_index_fini(struct cg_index *ix);
/* The chunk with the scratch's content, or NULL. */
struct cg_chunk *cg_index_find(const struct cg_index *ix, const struct cg_scratch *sc);
struct cg_chunk *cg_index_find_key(const struct cg_index *ix, uint64_t key);
/* A new chunk holding a copy of the scratch's content; NULL when out of memory or full. */
struct cg_chunk *cg_index_add(struct cg_index *ix, const struct cg_scratch *sc);
bool cg_index_arm(struct cg_index *ix, struct cg_chunk *t);
void cg_index_disarm(struct cg_index *ix, struct cg_chunk *t);
/* Armed chunks whose first op hashes to `hash` (chained through armed_next), or NULL. */
struct cg_chunk *cg_index_armed(const struct cg_index *ix, uint64_t hash);

/* Where chunks run, for deferral to predict which chunk comes: a place is the chunk that ended
 * before it and how often that chunk had ended since the last boundary (the k-th of 12
 * identical layers is a place of its own, the last layer another). A place remembers the two
 * chunks that ran there lately, each with how often it was the one; a new third replaces the
 * weaker. Direct-mapped: a colliding place takes the slot over. */
struct cg_place {
	uint64_t place;        /* 0: empty */
	uint64_t key[2];       /* chunks that ran here */
	uint8_t hits[2];       /* how often each ran here lately (saturating, the other decays) */
	uint8_t last;          /* which ran here last */
};
struct cg_places {
	struct cg_place *slot; /* NULL: none yet (allocated on first use) */
	uint32_t mask, used;
};

/* The place after the `occurrence`-th end of chunk `key` since the last boundary; never 0. */
uint64_t cg_place_after(uint64_t key, uint32_t occurrence);
/* What running chunk `key` at a place did to it: the place is new (or the table is absent), the
 * chunk ran there before, it is the place's second variant, or a third that took the weaker
 * one's slot (a place keeps two). */
enum cg_place_note { CG_PLACE_NEW, CG_PLACE_SAME, CG_PLACE_SECOND, CG_PLACE_REPLACED };
/* Chunk `key` ran at `place`. The table grows towards `hint` places (the chunks known); out of
 * memory it stays as it is (or absent: nothing is predicted). */
enum cg_place_note cg_places_note(struct cg_places *p, uint64_t place, uint64_t key,
                                  uint32_t hint, cg_realloc_fn mem);
/* The chunk that ran at `place` most often lately (0: unknown), and by how many runs it leads
 * the other one that ran there (*margin, 0 to 7: how settled the place is). */
uint64_t cg_places_predict(const struct cg_places *p, uint64_t place, uint32_t *margin);
void cg_places_fini(struct cg_places *p, cg_realloc_fn mem);

/* Warmup: mark the argument words that differ from the previous occurrence, keep these. */
void cg_chunk_note_args(struct cg_chunk *t, const struct cg_scratch *sc);
/* The graph was built with the scratch's arguments: hold them for the patch comparison. */
void cg_chunk_hold_args(struct cg_chunk *t, const struct cg_scratch *sc);
/* Arguments held by instance k (0 <= k < ninst). */
static inline unsigned char *cg_chunk_inst_args(struct cg_chunk *t, uint32_t k)
{
	return k ? t->xargs + (size_t)(k - 1) * t->args_off[t->n] : t->args;
}
void cg_chunk_hold_inst_args(struct cg_chunk *t, uint32_t k, const struct cg_scratch *sc);
void cg_chunk_arg_words(const struct cg_chunk *t, uint64_t *constant, uint64_t *changing);
/* Did warmup see the arguments change at most of its ops (three in four), or has it not seen
 * two occurrences to compare (a chunk cut from others and built at once)? Its graph's nodes are
 * then likely all patched at every launch anyway: it may share an executable (backend.h), whose
 * rent bounds what a wrong guess costs. */
bool cg_chunk_changes_most(const struct cg_chunk *t);

#endif
