/* Chunk templates: the copy of a learned chunk, its argument classes, and the two per-stream
 * tables that find it (by content while learning, by first op while replaying). */
#include <stdlib.h>
#include "policy/chunk.h"
#include "policy/mix.h"

/* A stream that never repeats itself (shapes change every step) would otherwise grow without
 * bound (a chunk of 64 launches holds ~12 KiB); past this many chunks new content stays eager
 * (reason LEARNING). */
#define CG_MAX_CHUNKS 4096u
#define CG_INDEX_START 64

/* ---- scratch ---------------------------------------------------------------------------- */

bool cg_scratch_init(struct cg_scratch *sc, uint32_t chunk_max, cg_realloc_fn mem)
{
	size_t per_op = sizeof(uint64_t) + 4 * sizeof(uint32_t) + sizeof(char *);
	memset(sc, 0, sizeof(*sc));
	sc->hash = mem(NULL, per_op * chunk_max);
	if (!sc->hash)
		return false;
	sc->name = (const char **)(sc->hash + chunk_max);
	sc->sig_off = (uint32_t *)(sc->name + chunk_max);
	sc->sig_len = sc->sig_off + chunk_max;
	sc->args_off = sc->sig_len + chunk_max;
	sc->args_len = sc->args_off + chunk_max;
	/* Room for 256 bytes per op covers the usual launch; bigger ones grow the buffer. */
	if (!cg_scratch_reserve(sc, (size_t)chunk_max * 256, mem)) {
		mem(sc->hash, 0);
		return false;
	}
	cg_scratch_reset(sc);
	return true;
}

void cg_scratch_fini(struct cg_scratch *sc, cg_realloc_fn mem)
{
	mem(sc->hash, 0);
	mem(sc->bytes, 0);
}

bool cg_scratch_reserve(struct cg_scratch *sc, size_t bytes, cg_realloc_fn mem)
{
	if (sc->cap - sc->used >= bytes)
		return true;
	size_t cap = sc->cap ? sc->cap : 4096;
	while (cap - sc->used < bytes)
		cap *= 2;
	unsigned char *p = mem(sc->bytes, cap);
	if (!p)
		return false;
	sc->bytes = p;
	sc->cap = cap;
	return true;
}

#define CG_KEY_SEED 0x243f6a8885a308d3ull

static uint64_t key_step(uint64_t key, uint64_t hash)
{
	return (cg_rotl64(key, 23) ^ hash) * 0x9e3779b97f4a7c15ull;
}

static uint64_t key_final(uint64_t key, uint32_t n)
{
	uint64_t k = cg_fmix64(key ^ ((uint64_t)n * 0xc2b2ae3d27d4eb4full));
	return k ? k : 1;
}

void cg_scratch_push(struct cg_scratch *sc, const struct cg_op *op, uint64_t hash, cg_realloc_fn mem)
{
	uint32_t i = sc->n++;
	sc->key = key_step(sc->key, hash);
	sc->hash[i] = hash;
	if (sc->lossy || !cg_scratch_reserve(sc, (size_t)op->sig_len + op->args_len, mem)) {
		sc->lossy = true;
		return;
	}
	sc->name[i] = op->name;
	sc->sig_off[i] = (uint32_t)sc->used;
	sc->sig_len[i] = op->sig_len;
	memcpy(sc->bytes + sc->used, op->sig, op->sig_len);
	sc->used += op->sig_len;
	sc->args_off[i] = (uint32_t)sc->used;
	sc->args_len[i] = op->args_len;
	memcpy(sc->bytes + sc->used, op->args, op->args_len);
	sc->used += op->args_len;
}

void cg_scratch_op(const struct cg_scratch *sc, uint32_t i, struct cg_op *out)
{
	out->sig = sc->bytes + sc->sig_off[i];
	out->sig_len = sc->sig_len[i];
	out->args = sc->bytes + sc->args_off[i];
	out->args_len = sc->args_len[i];
	out->hash = sc->hash[i];
	out->name = sc->name[i];
}

uint64_t cg_scratch_key(const struct cg_scratch *sc)
{
	return key_final(sc->key, sc->n);
}

uint64_t cg_chunk_prefix_key(const struct cg_chunk *t, uint32_t m)
{
	uint64_t key = CG_KEY_SEED;
	for (uint32_t i = 0; i < m && i < t->n; i++)
		key = key_step(key, t->hash[i]);
	return key_final(key, m < t->n ? m : t->n);
}

void cg_scratch_reset(struct cg_scratch *sc)
{
	sc->n = 0;
	sc->used = 0;
	sc->lossy = false;
	sc->key = CG_KEY_SEED;
}

bool cg_scratch_prepend(struct cg_scratch *sc, const struct cg_chunk *t, uint32_t k,
                        cg_realloc_fn mem)
{
	uint32_t from = t->n - k, n = sc->n;
	size_t bytes = t->sig_off[t->n] - t->sig_off[from] + t->args_off[t->n] - t->args_off[from];
	if (sc->lossy || !cg_scratch_reserve(sc, bytes, mem))
		return false;
	memmove(sc->bytes + bytes, sc->bytes, sc->used);
	memmove(sc->hash + k, sc->hash, n * sizeof(*sc->hash));
	memmove(sc->name + k, sc->name, n * sizeof(*sc->name));
	memmove(sc->sig_len + k, sc->sig_len, n * sizeof(*sc->sig_len));
	memmove(sc->args_len + k, sc->args_len, n * sizeof(*sc->args_len));
	memmove(sc->sig_off + k, sc->sig_off, n * sizeof(*sc->sig_off));
	memmove(sc->args_off + k, sc->args_off, n * sizeof(*sc->args_off));
	for (uint32_t i = k; i < k + n; i++) {
		sc->sig_off[i] += (uint32_t)bytes;
		sc->args_off[i] += (uint32_t)bytes;
	}
	size_t at = 0;
	for (uint32_t i = 0; i < k; i++) {
		uint32_t j = from + i;
		uint32_t sl = t->sig_off[j + 1] - t->sig_off[j], al = t->args_off[j + 1] - t->args_off[j];
		sc->hash[i] = t->hash[j];
		sc->name[i] = t->name[j];
		sc->sig_off[i] = (uint32_t)at;
		sc->sig_len[i] = sl;
		memcpy(sc->bytes + at, t->sig + t->sig_off[j], sl);
		at += sl;
		sc->args_off[i] = (uint32_t)at;
		sc->args_len[i] = al;
		memcpy(sc->bytes + at, t->args + t->args_off[j], al);
		at += al;
	}
	sc->used += bytes;
	sc->n = n + k;
	sc->key = CG_KEY_SEED;
	for (uint32_t i = 0; i < sc->n; i++)
		sc->key = key_step(sc->key, sc->hash[i]);
	return true;
}

void cg_scratch_drop_front(struct cg_scratch *sc, uint32_t k)
{
	uint32_t n = sc->n - k;
	memmove(sc->hash, sc->hash + k, n * sizeof(*sc->hash));
	sc->key = CG_KEY_SEED;
	for (uint32_t i = 0; i < n; i++)
		sc->key = key_step(sc->key, sc->hash[i]);
	sc->n = n;
	if (sc->lossy)
		return;  /* only hashes are kept */
	size_t from = sc->sig_off[k];
	memmove(sc->name, sc->name + k, n * sizeof(*sc->name));
	memmove(sc->sig_len, sc->sig_len + k, n * sizeof(*sc->sig_len));
	memmove(sc->args_len, sc->args_len + k, n * sizeof(*sc->args_len));
	for (uint32_t i = 0; i < n; i++) {
		sc->sig_off[i] = (uint32_t)(sc->sig_off[i + k] - from);
		sc->args_off[i] = (uint32_t)(sc->args_off[i + k] - from);
	}
	memmove(sc->bytes, sc->bytes + from, sc->used - from);
	sc->used -= from;
}

/* ---- index ------------------------------------------------------------------------------ */

bool cg_index_init(struct cg_index *ix, cg_realloc_fn mem)
{
	memset(ix, 0, sizeof(*ix));
	ix->mem = mem;
	ix->by_key = mem(NULL, CG_INDEX_START * sizeof(*ix->by_key));
	ix->by_first = mem(NULL, CG_INDEX_START * sizeof(*ix->by_first));
	if (!ix->by_key || !ix->by_first) {
		mem(ix->by_key, 0);
		mem(ix->by_first, 0);
		return false;
	}
	memset(ix->by_key, 0, CG_INDEX_START * sizeof(*ix->by_key));
	memset(ix->by_first, 0, CG_INDEX_START * sizeof(*ix->by_first));
	ix->key_mask = ix->first_mask = CG_INDEX_START - 1;
	return true;
}

void cg_index_fini(struct cg_index *ix)
{
	for (uint32_t i = 0; i <= ix->key_mask; i++) {
		struct cg_chunk *t = ix->by_key[i];
		if (t) {
			ix->mem(t->xgraph, 0);
			ix->mem(t->xargs, 0);
		}
		ix->mem(t, 0);
	}
	ix->mem(ix->by_key, 0);
	ix->mem(ix->by_first, 0);
}

static bool same_content(const struct cg_chunk *t, const struct cg_scratch *sc)
{
	if (t->n != sc->n)
		return false;
	for (uint32_t i = 0; i < sc->n; i++) {
		struct cg_op op;
		cg_scratch_op(sc, i, &op);
		if (!cg_chunk_op_matches(t, i, &op, sc->hash[i]))
			return false;
	}
	return true;
}

/* A key collision with different bytes is a different chunk: probing goes on past it. */
struct cg_chunk *cg_index_find(const struct cg_index *ix, const struct cg_scratch *sc)
{
	uint64_t key = cg_scratch_key(sc);
	for (uint32_t i = (uint32_t)key & ix->key_mask;; i = (i + 1) & ix->key_mask) {
		struct cg_chunk *t = ix->by_key[i];
		if (!t)
			return NULL;
		if (t->key == key && same_content(t, sc))
			return t;
	}
}

struct cg_chunk *cg_index_find_key(const struct cg_index *ix, uint64_t key)
{
	for (uint32_t i = (uint32_t)key & ix->key_mask;; i = (i + 1) & ix->key_mask) {
		struct cg_chunk *t = ix->by_key[i];
		if (!t || t->key == key)
			return t;
	}
}

static void key_insert(struct cg_chunk **slots, uint32_t mask, struct cg_chunk *t)
{
	uint32_t i = (uint32_t)t->key & mask;
	while (slots[i])
		i = (i + 1) & mask;
	slots[i] = t;
}

/* Keep both tables at most half full: probes stay short and an empty slot always exists. */
static bool key_room(struct cg_index *ix)
{
	if (2 * (ix->nchunks + 1) <= ix->key_mask + 1)
		return true;
	uint32_t cap = 2 * (ix->key_mask + 1);
	struct cg_chunk **slots = ix->mem(NULL, cap * sizeof(*slots));
	if (!slots)
		return false;
	memset(slots, 0, cap * sizeof(*slots));
	for (uint32_t i = 0; i <= ix->key_mask; i++)
		if (ix->by_key[i])
			key_insert(slots, cap - 1, ix->by_key[i]);
	ix->mem(ix->by_key, 0);
	ix->by_key = slots;
	ix->key_mask = cap - 1;
	return true;
}

struct cg_chunk *cg_index_add(struct cg_index *ix, const struct cg_scratch *sc)
{
	uint32_t n = sc->n;
	size_t sig_bytes = 0, args_bytes = 0;
	for (uint32_t i = 0; i < n; i++) {
		sig_bytes += sc->sig_len[i];
		args_bytes += sc->args_len[i];
	}
	if (ix->nchunks >= CG_MAX_CHUNKS || sc->lossy || !key_room(ix))
		return NULL;
	/* One allocation: header, 8-byte arrays, pointer array, offsets, then the bytes. */
	size_t head = (sizeof(struct cg_chunk) + 7) & ~(size_t)7;
	size_t size = head + n * (2 * sizeof(uint64_t) + sizeof(char *)) +
	              2 * (n + 1) * sizeof(uint32_t) + sig_bytes + args_bytes;
	struct cg_chunk *t = ix->mem(NULL, size);
	if (!t)
		return NULL;
	memset(t, 0, head);
	t->key = cg_scratch_key(sc);
	t->n = n;
	t->hash = (uint64_t *)((char *)t + head);
	t->changed = t->hash + n;
	t->name = (const char **)(t->changed + n);
	t->sig_off = (uint32_t *)(t->name + n);
	t->args_off = t->sig_off + n + 1;
	t->sig = (unsigned char *)(t->args_off + n + 1);
	t->args = t->sig + sig_bytes;
	t->sig_off[0] = t->args_off[0] = 0;
	for (uint32_t i = 0; i < n; i++) {
		t->hash[i] = sc->hash[i];
		t->changed[i] = 0;
		t->name[i] = sc->name[i];
		memcpy(t->sig + t->sig_off[i], sc->bytes + sc->sig_off[i], sc->sig_len[i]);
		t->sig_off[i + 1] = t->sig_off[i] + sc->sig_len[i];
		memcpy(t->args + t->args_off[i], sc->bytes + sc->args_off[i], sc->args_len[i]);
		t->args_off[i + 1] = t->args_off[i] + sc->args_len[i];
	}
	key_insert(ix->by_key, ix->key_mask, t);
	ix->nchunks++;
	return t;
}

static struct cg_first *first_slot(struct cg_first *slots, uint32_t mask, uint64_t hash)
{
	uint32_t i = (uint32_t)hash & mask;
	while (slots[i].hash && slots[i].hash != hash)
		i = (i + 1) & mask;
	return &slots[i];
}

static bool first_room(struct cg_index *ix)
{
	if (2 * (ix->nfirst + 1) <= ix->first_mask + 1)
		return true;
	uint32_t cap = 2 * (ix->first_mask + 1);
	struct cg_first *slots = ix->mem(NULL, cap * sizeof(*slots));
	if (!slots)
		return false;
	memset(slots, 0, cap * sizeof(*slots));
	for (uint32_t i = 0; i <= ix->first_mask; i++)
		if (ix->by_first[i].hash)
			*first_slot(slots, cap - 1, ix->by_first[i].hash) = ix->by_first[i];
	ix->mem(ix->by_first, 0);
	ix->by_first = slots;
	ix->first_mask = cap - 1;
	return true;
}

bool cg_index_arm(struct cg_index *ix, struct cg_chunk *t)
{
	struct cg_first *f = first_slot(ix->by_first, ix->first_mask, t->hash[0]);
	if (!f->hash) {
		/* Slots are never emptied: a first-op hash seen once keeps its slot. */
		if (!first_room(ix))
			return false;
		f = first_slot(ix->by_first, ix->first_mask, t->hash[0]);
		f->hash = t->hash[0];
		ix->nfirst++;
	}
	t->armed_next = f->armed;
	f->armed = t;
	return true;
}

void cg_index_disarm(struct cg_index *ix, struct cg_chunk *t)
{
	struct cg_first *f = first_slot(ix->by_first, ix->first_mask, t->hash[0]);
	for (struct cg_chunk **p = &f->armed; *p; p = &(*p)->armed_next) {
		if (*p == t) {
			*p = t->armed_next;
			break;
		}
	}
	t->armed_next = NULL;
}

struct cg_chunk *cg_index_armed(const struct cg_index *ix, uint64_t hash)
{
	return first_slot(ix->by_first, ix->first_mask, hash)->armed;
}

/* ---- argument classes ------------------------------------------------------------------- */

void cg_chunk_note_args(struct cg_chunk *t, const struct cg_scratch *sc)
{
	t->args_seen++;
	for (uint32_t i = 0; i < t->n; i++) {
		const unsigned char *held = t->args + t->args_off[i], *now = sc->bytes + sc->args_off[i];
		uint32_t len = sc->args_len[i];
		if (memcmp(held, now, len) == 0)
			continue;
		for (uint32_t w = 0; w * 8 < len; w++) {
			uint64_t a = 0, b = 0;
			uint32_t at = w * 8, part = len - at < 8 ? len - at : 8;
			memcpy(&a, held + at, part);
			memcpy(&b, now + at, part);
			if (a != b)
				t->changed[i] |= 1ull << (w < 63 ? w : 63);
		}
	}
	cg_chunk_hold_args(t, sc);
}

void cg_chunk_hold_args(struct cg_chunk *t, const struct cg_scratch *sc)
{
	for (uint32_t i = 0; i < t->n; i++)
		memcpy(t->args + t->args_off[i], sc->bytes + sc->args_off[i], sc->args_len[i]);
}

void cg_chunk_hold_inst_args(struct cg_chunk *t, uint32_t k, const struct cg_scratch *sc)
{
	unsigned char *held = cg_chunk_inst_args(t, k);
	for (uint32_t i = 0; i < t->n; i++)
		memcpy(held + t->args_off[i], sc->bytes + sc->args_off[i], sc->args_len[i]);
}

void cg_chunk_arg_words(const struct cg_chunk *t, uint64_t *constant, uint64_t *changing)
{
	*constant = *changing = 0;
	for (uint32_t i = 0; i < t->n; i++) {
		uint64_t words = (t->args_off[i + 1] - t->args_off[i] + 7) / 8;
		uint64_t ch = (uint64_t)__builtin_popcountll(t->changed[i]);
		if (ch > words)
			ch = words;
		*changing += ch;
		*constant += words - ch;
	}
}

bool cg_chunk_changes_most(const struct cg_chunk *t)
{
	if (t->args_seen < 2)
		return true;
	uint32_t changing = 0;
	for (uint32_t i = 0; i < t->n; i++)
		changing += t->changed[i] != 0;
	return 4 * changing >= 3 * t->n;
}

/* ---- places ----------------------------------------------------------------------------- */

#define CG_PLACES_FIRST 256u
#define CG_PLACES_MAX 8192u   /* 256 KiB per stream at most */
#define CG_PLACES_PER_CHUNK 8 /* grown up to this many slots per known chunk */
#define CG_PLACE_PROBE 8      /* slots a place may be found in */
#define CG_PLACE_HITS 7       /* a place whose chunk changes for good follows it within 4 runs */

uint64_t cg_place_after(uint64_t key, uint32_t occurrence)
{
	uint64_t p = cg_fmix64(key ^ ((uint64_t)occurrence + 1) * 0x9e3779b97f4a7c15ull);
	return p ? p : 1;
}

/* The place's slot, or (`take`) where it goes: an empty slot, else the least used one of its
 * probe window (a table full of places that never recur forgets them first). */
static struct cg_place *place_find(const struct cg_places *p, uint64_t place, bool take)
{
	struct cg_place *weakest = NULL;
	for (uint32_t k = 0; k < CG_PLACE_PROBE; k++) {
		struct cg_place *s = &p->slot[((uint32_t)(place ^ (place >> 32)) + k) & p->mask];
		if (s->place == place)
			return s;
		if (!s->place)
			return take ? s : NULL;
		if (!weakest || s->hits[0] + s->hits[1] < weakest->hits[0] + weakest->hits[1])
			weakest = s;
	}
	return take ? weakest : NULL;
}

/* Double the table while it is over half full, within CG_PLACES_PER_CHUNK slots per chunk. */
static void places_grow(struct cg_places *p, uint32_t hint, cg_realloc_fn mem)
{
	uint32_t cap = p->slot ? p->mask + 1 : 0;
	if (cap && (2 * p->used <= cap || cap >= CG_PLACES_MAX ||
	            cap >= (uint64_t)CG_PLACES_PER_CHUNK * hint))
		return;
	uint32_t want = cap ? 2 * cap : CG_PLACES_FIRST;
	struct cg_place *slot = mem(NULL, want * sizeof(*slot));
	if (!slot)
		return;
	memset(slot, 0, want * sizeof(*slot));
	struct cg_places grown = { slot, want - 1, 0 };
	for (uint32_t i = 0; i < cap; i++) {
		if (!p->slot[i].place)
			continue;
		struct cg_place *to = place_find(&grown, p->slot[i].place, true);
		grown.used += !to->place;
		*to = p->slot[i];
	}
	mem(p->slot, 0);
	*p = grown;
}

enum cg_place_note cg_places_note(struct cg_places *p, uint64_t place, uint64_t key,
                                  uint32_t hint, cg_realloc_fn mem)
{
	places_grow(p, hint, mem);
	if (!p->slot)
		return CG_PLACE_NEW;
	struct cg_place *s = place_find(p, place, true);
	if (s->place != place) {
		p->used += !s->place;
		*s = (struct cg_place){ .place = place, .key = { key, 0 }, .hits = { 1, 0 } };
		return CG_PLACE_NEW;
	}
	enum cg_place_note note = CG_PLACE_SAME;
	uint8_t i = s->key[0] == key ? 0 : s->key[1] == key ? 1 : 2;
	if (i == 2 && !s->key[1]) {
		i = 1;  /* the place's second chunk */
		s->key[1] = key;
		note = CG_PLACE_SECOND;
	} else if (i == 2) {  /* a third chunk: it replaces the weaker */
		i = s->hits[0] < s->hits[1] ? 0 : 1;
		s->key[i] = key;
		s->hits[i] = 0;
		note = CG_PLACE_REPLACED;
	}
	if (s->hits[i] < CG_PLACE_HITS)
		s->hits[i]++;
	if (s->hits[1 - i])
		s->hits[1 - i]--;
	s->last = i;
	return note;
}

uint64_t cg_places_predict(const struct cg_places *p, uint64_t place, uint32_t *margin)
{
	const struct cg_place *s = p->slot ? place_find(p, place, false) : NULL;
	*margin = 0;
	if (!s)
		return 0;
	uint8_t i = s->hits[0] > s->hits[1] ? 0 : s->hits[1] > s->hits[0] ? 1 : s->last;
	*margin = s->hits[i] - s->hits[1 - i];
	return s->hits[i] ? s->key[i] : 0;
}

void cg_places_fini(struct cg_places *p, cg_realloc_fn mem)
{
	mem(p->slot, 0);
	memset(p, 0, sizeof(*p));
}
