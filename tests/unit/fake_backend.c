/* The recording fake backend (see fake_backend.h). Graphs copy their nodes at build time and
 * only change through patch, so a missed patch shows up as wrong bytes in the log. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fake_backend.h"

#define GRAPH_MAGIC 0x67726170u

struct fake_node {
	uint32_t sig_len, args_len;
	unsigned char *sig, *args;
};

struct fake_graph {
	uint32_t magic, stream, n;
	struct fake_node node[];
};

static unsigned char *dup_bytes(const void *p, uint32_t n)
{
	unsigned char *d = malloc(n ? n : 1);
	if (!d)
		abort();
	memcpy(d, p, n);
	return d;
}

static void append(struct fake_exec **list, size_t *n, size_t *cap, uint32_t stream,
                   bool in_graph, const void *sig, uint32_t sig_len, const void *args,
                   uint32_t args_len)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 1024;
		*list = realloc(*list, *cap * sizeof(**list));
		if (!*list)
			abort();
	}
	(*list)[(*n)++] = (struct fake_exec){ .stream = stream, .in_graph = in_graph,
		.sig_len = sig_len, .args_len = args_len,
		.sig = dup_bytes(sig, sig_len), .args = dup_bytes(args, args_len) };
}

static void record(struct fake_backend *fb, uint32_t stream, bool in_graph, const void *sig,
                   uint32_t sig_len, const void *args, uint32_t args_len)
{
	append(&fb->log, &fb->nlog, &fb->cap, stream, in_graph, sig, sig_len, args, args_len);
	if (stream < FAKE_STREAMS)
		fb->ran[stream]++;
	else
		fb->contract_errors++;
}

static uint64_t next_rand(struct fake_backend *fb)
{
	fb->rng ^= fb->rng << 13;
	fb->rng ^= fb->rng >> 7;
	fb->rng ^= fb->rng << 17;
	return fb->rng;
}

static bool should_fail(struct fake_backend *fb, enum fake_call c, const char **detail)
{
	uint64_t n = ++fb->calls[c];
	bool fail = n == fb->fail_nth[c] ||
	            (fb->fail_permille[c] && next_rand(fb) % 1000 < fb->fail_permille[c]);
	if (fail && detail)
		*detail = "FAKE_INJECTED_FAILURE";
	return fail;
}

static struct fake_graph *graph_of(struct fake_backend *fb, void *g)
{
	struct fake_graph *graph = g;
	if (!graph || graph->magic != GRAPH_MAGIC) {
		fb->contract_errors++;
		return NULL;
	}
	return graph;
}

static int fake_eager(void *be, void *stream, const struct cg_op *op, const char **detail)
{
	struct fake_backend *fb = be;
	fb->eager++;
	record(fb, fake_stream_id(stream), false, op->sig, op->sig_len, op->args, op->args_len);
	return 0;
}

static int fake_build(void *be, void *stream, const struct cg_op *ops, uint32_t n, bool share,
                      void **graph, const char **detail)
{
	struct fake_backend *fb = be;
	if (should_fail(fb, FAKE_BUILD, detail))
		return -ENOMEM;
	fb->shared_builds += share;
	struct fake_graph *g = malloc(sizeof(*g) + n * sizeof(g->node[0]));
	if (!g)
		abort();
	g->magic = GRAPH_MAGIC;
	g->stream = fake_stream_id(stream);
	g->n = n;
	for (uint32_t i = 0; i < n; i++)
		g->node[i] = (struct fake_node){ ops[i].sig_len, ops[i].args_len,
			dup_bytes(ops[i].sig, ops[i].sig_len), dup_bytes(ops[i].args, ops[i].args_len) };
	fb->graphs_alive++;
	fb->built++;
	*graph = g;
	return 0;
}

static int fake_claim(void *be, void *graph, const char **detail)
{
	struct fake_backend *fb = be;
	struct fake_graph *g = graph_of(fb, graph);
	if (!g)
		return -EINVAL;
	if (!fb->steal_all) {
		if (!fb->steal_permille)
			return 0;
		fb->rng = fb->rng * 6364136223846793005ull + 1442695040888963407ull;
		if ((fb->rng >> 33) % 1000 >= fb->steal_permille)
			return 0;
	}
	for (uint32_t i = 0; i < g->n; i++)
		memset(g->node[i].args, 0x5A, g->node[i].args_len);
	fb->steals++;
	return 1;
}

static int fake_patch(void *be, void *graph, uint32_t index, const struct cg_op *op, const char **detail)
{
	struct fake_backend *fb = be;
	struct fake_graph *g = graph_of(fb, graph);
	if (!g || index >= g->n)
		return -EINVAL;
	struct fake_node *nd = &g->node[index];
	if (nd->sig_len != op->sig_len || memcmp(nd->sig, op->sig, op->sig_len) != 0 ||
	    nd->args_len != op->args_len) {
		fb->contract_errors++;
		return -EINVAL;
	}
	if (should_fail(fb, FAKE_PATCH, detail)) {
		/* Like a driver that failed half-way: the node is left in an unknown state. */
		memset(nd->args, 0xA5, nd->args_len);
		return -EIO;
	}
	memcpy(nd->args, op->args, op->args_len);
	fb->patches++;
	return 0;
}

static int fake_launch(void *be, void *stream, void *graph, const char **detail)
{
	struct fake_backend *fb = be;
	struct fake_graph *g = graph_of(fb, graph);
	if (!g)
		return -EINVAL;
	if (g->stream != fake_stream_id(stream))
		fb->contract_errors++;
	if (should_fail(fb, FAKE_LAUNCH, detail))
		return -EIO;
	for (uint32_t i = 0; i < g->n; i++)
		record(fb, g->stream, true, g->node[i].sig, g->node[i].sig_len, g->node[i].args,
		       g->node[i].args_len);
	fb->graph_launches++;
	return 0;
}

static void fake_destroy(void *be, void *graph)
{
	struct fake_backend *fb = be;
	struct fake_graph *g = graph_of(fb, graph);
	if (!g)
		return;
	g->magic = 0;
	for (uint32_t i = 0; i < g->n; i++) {
		free(g->node[i].sig);
		free(g->node[i].args);
	}
	free(g);
	fb->graphs_alive--;
}

static void copy_op(struct cg_op *dst, unsigned char *buf, const struct cg_op *src)
{
	*dst = *src;
	uint32_t sl = src->sig_len < 256 ? src->sig_len : 256;
	uint32_t al = src->args_len < 256 ? src->args_len : 256;
	memcpy(buf, src->sig, sl);
	memcpy(buf + 256, src->args, al);
	dst->sig = buf;
	dst->args = buf + 256;
	dst->sig_len = sl;
	dst->args_len = al;
}

static void fake_event(void *be, const struct cg_event *ev)
{
	struct fake_backend *fb = be;
	if ((unsigned)ev->kind < 8)
		fb->events[ev->kind]++;
	if (ev->kind == CG_EV_DECISION && fb->ndecisions < 64)
		fb->decision[fb->ndecisions++] = *ev->decision;
	if (ev->kind == CG_EV_GRAPH_BUILT)
		fb->last_built_key = ev->chunk_key, fb->last_built_ops = ev->chunk_ops;
	if (ev->kind != CG_EV_FALLBACK)
		return;
	fb->fallback_events[ev->reason]++;
	if (ev->reason == CG_R_DIVERGENCE) {
		fb->last_divergence = *ev;
		if (ev->expected)
			copy_op(&fb->div_expected, fb->div_bytes[0], ev->expected);
		if (ev->got)
			copy_op(&fb->div_got, fb->div_bytes[1], ev->got);
	}
}

void fake_backend_init(struct fake_backend *fb, uint64_t seed)
{
	memset(fb, 0, sizeof(*fb));
	fb->table = (struct cg_backend){ .eager = fake_eager, .build = fake_build,
	                                 .claim = fake_claim, .patch = fake_patch, .launch = fake_launch,
	                                 .destroy = fake_destroy, .event = fake_event };
	fb->rng = seed * 0x9e3779b97f4a7c15ull + 1;
}

static void free_list(struct fake_exec *list, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(list[i].sig);
		free(list[i].args);
	}
}

void fake_backend_clear_log(struct fake_backend *fb)
{
	free_list(fb->log, fb->nlog);
	free_list(fb->want, fb->nwant);
	fb->nlog = fb->nwant = 0;
	memset(fb->ran, 0, sizeof(fb->ran));
	memset(fb->submitted, 0, sizeof(fb->submitted));
}

void fake_backend_fini(struct fake_backend *fb)
{
	fake_backend_clear_log(fb);
	free(fb->log);
	free(fb->want);
	fb->log = fb->want = NULL;
	fb->cap = fb->want_cap = 0;
}

/* The shim was handed `op` on stream `id`: it must run once, in this order. */
static void wanted(struct fake_backend *fb, uint32_t id, const struct cg_op *op)
{
	append(&fb->want, &fb->nwant, &fb->want_cap, id, false, op->sig, op->sig_len, op->args,
	       op->args_len);
	fb->submitted[id]++;
}

enum cg_verdict fake_submit(struct fake_backend *fb, struct cg_stream *s, uint32_t id,
                            const struct cg_op *op)
{
	wanted(fb, id, op);
	enum cg_verdict v = cg_submit(s, op);
	if (v == CG_PASS) {
		/* Invariant: a passed op runs after everything submitted before it. */
		if (fb->ran[id] != fb->submitted[id] - 1 || cg_stream_pending(s))
			fb->contract_errors++;
		record(fb, id, false, op->sig, op->sig_len, op->args, op->args_len);
	}
	return v;
}

void fake_pass(struct fake_backend *fb, struct cg_stream *s, uint32_t id, const struct cg_op *op)
{
	fake_boundary(fb, s, id, CG_R_UNPROVEN_SHAPE);
	wanted(fb, id, op);
	cg_passed(s, op, true);
	record(fb, id, false, op->sig, op->sig_len, op->args, op->args_len);
}

void fake_boundary(struct fake_backend *fb, struct cg_stream *s, uint32_t id, enum cg_reason why)
{
	cg_boundary(s, why);
	if (fb->ran[id] != fb->submitted[id] || cg_stream_pending(s))
		fb->contract_errors++;
}

void fake_flush(struct fake_backend *fb, struct cg_stream *s, uint32_t id, enum cg_reason why)
{
	bool had = cg_stream_pending(s);
	if (cg_flush(s, why) != had)
		fb->contract_errors++;
	if (fb->ran[id] != fb->submitted[id] || cg_stream_pending(s))
		fb->contract_errors++;
}

static bool same_exec(const struct fake_exec *a, const struct fake_exec *b)
{
	return a->sig_len == b->sig_len && a->args_len == b->args_len &&
	       memcmp(a->sig, b->sig, a->sig_len) == 0 && memcmp(a->args, b->args, a->args_len) == 0;
}

bool fake_backend_same(const struct fake_backend *fb, char *msg, size_t msg_len)
{
	for (uint32_t id = 0; id < FAKE_STREAMS; id++) {
		size_t r = 0, w = 0, k = 0;
		for (;; k++) {
			while (r < fb->nlog && fb->log[r].stream != id)
				r++;
			while (w < fb->nwant && fb->want[w].stream != id)
				w++;
			if (r == fb->nlog && w == fb->nwant)
				break;
			if (r == fb->nlog || w == fb->nwant || !same_exec(&fb->log[r], &fb->want[w])) {
				snprintf(msg, msg_len, "stream %u op %zu: %s", id, k,
				         r == fb->nlog ? "missing" : w == fb->nwant ? "extra" : "differs");
				return false;
			}
			r++;
			w++;
		}
	}
	return true;
}
