/* The collective-graph cache and the per-communicator vote state (collgraph.h). Per
 * communicator: a table of the collectives called on it, keyed by the exact call, each with its
 * seen count and, once captured, its graph and the vote (epoch) at which every rank captured it.
 * Everything a communicator owns is used under its lock; NCCL forbids concurrent calls on one
 * communicator anyway. Graphs hold NCCL resources: destroyed before the communicator and at exit. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collgraph.h"
#include "shim/context/context.h"
#include "shim/loader/driver.h"
#include "shim/base/json.h"
#include "shim/base/log.h"
#include "shim/base/options.h"
#include "shim/base/report.h"
#include "shim/base/shim.h"

#define COMMS 256         /* communicator records; gone ones are reused when all are taken */
#define SLOTS 1024        /* distinct collectives per communicator (open addressing) */
#define PROBES 32
#define MAX_DECLINES 3    /* disagreements before a communicator's collectives stay eager */

/* Vote values: equal on all ranks iff every rank will do the same thing. */
#define V_EAGER 0
#define V_CAPTURE 1
#define V_REPLAY 2        /* + the epoch: the vote number at which the graph was captured */

struct cg_coll_slot {
	uint64_t hash;        /* 0: empty */
	int entry, nw;
	uint64_t w[CG_COLL_WORDS];
	uint32_t seen;        /* calls since the last disagreement */
	int64_t epoch;        /* -1: no graph */
	CUgraph graph;
	CUgraphExec exec;
	CUcontext ctx;
};

struct counts { uint64_t seen, graphed, captured, votes, agreed, declined, timed_out; };

struct cg_coll_comm {
	pthread_mutex_t lock;
	ncclComm_t comm;
	bool gone;            /* finalized, destroyed, revoked or aborted */
	bool off;             /* no votes any more: every collective eager */
	enum cg_reason off_why;
	unsigned id;          /* names it in the report */
	int rank, nranks;     /* -1 until the vote communicator exists */
	uint64_t declines;
	struct cg_voter *voter;
	CUstream capture;     /* private stream collectives are captured on */
	CUcontext capture_ctx;
	struct counts n;
	struct cg_coll_slot *slots; /* SLOTS, allocated with the record */
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cg_coll_comm comms[COMMS];
static unsigned n_comms, next_id;
static struct counts total;
static uint64_t fallbacks[CG_R_COUNT];

static void drop_graph(struct cg_coll_slot *s)
{
	if (s->exec || s->graph) {
		if (!atomic_load(&cg_shim.driver_gone)) {
			int in = cg_ctx_enter(s->ctx);
			if (s->exec)
				CG_REAL(cuGraphExecDestroy)(s->exec);
			if (s->graph)
				CG_REAL(cuGraphDestroy)(s->graph);
			cg_ctx_leave(in);
		}
	}
	s->exec = NULL;
	s->graph = NULL;
	s->epoch = -1;
}

/* --- records ------------------------------------------------------------------------------ */
/* How long a communicator's end (or exit) waits for a vote thread still inside NCCL on it:
 * the vote timeout, and at least 10 s, since the first split of a job can take seconds. */
static long leave_wait_ms(void)
{
	long t = (long)cg_opt_int(CG_OPT_VOTE_TIMEOUT_MS);
	return t > 10000 ? t : 10000;
}

static void destroy_all_graphs(void)
{
	cg_voters_leave_parent(NULL, leave_wait_ms());
	for (unsigned i = 0; i < n_comms; i++) {
		struct cg_coll_comm *r = &comms[i];
		if (!r->slots || pthread_mutex_trylock(&r->lock) != 0)
			continue; /* exit() from another thread mid-collective: leave that one alone */
		for (int k = 0; k < SLOTS; k++)
			drop_graph(&r->slots[k]);
		pthread_mutex_unlock(&r->lock);
	}
}

/* The live record of comm, made at its first collective; NULL when out of memory. */
static struct cg_coll_comm *comm_get(ncclComm_t comm)
{
	static bool at_exit;
	pthread_mutex_lock(&table_lock);
	struct cg_coll_comm *r = NULL, *reuse = NULL;
	for (unsigned i = 0; i < n_comms && !r; i++) {
		if (comms[i].comm == comm && !comms[i].gone)
			r = &comms[i];
		else if (comms[i].gone && !reuse)
			reuse = &comms[i];
	}
	if (!r && (n_comms < COMMS || reuse)) {
		struct cg_coll_slot *slots = reuse ? reuse->slots : calloc(SLOTS, sizeof(*slots));
		if (slots) {
			r = reuse ? reuse : &comms[n_comms++];
			if (!reuse)
				pthread_mutex_init(&r->lock, NULL);
			memset(slots, 0, SLOTS * sizeof(*slots));
			memset(&r->n, 0, sizeof(r->n));
			r->comm = comm;
			r->gone = r->off = false;
			r->off_why = CG_R_NONE;
			r->id = next_id++;
			r->rank = r->nranks = -1;
			r->declines = 0;
			r->voter = NULL;
			r->capture = NULL;
			r->capture_ctx = NULL;
			r->slots = slots;
		}
	}
	if (r && !at_exit) {
		at_exit = true; /* registered after the shim's own: runs first, with the driver alive */
		atexit(destroy_all_graphs);
	}
	pthread_mutex_unlock(&table_lock);
	return r;
}

static uint64_t key_hash(const struct cg_coll_call *c)
{
	uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)c->entry;
	for (int i = 0; i < c->nw; i++)
		h = (h ^ c->w[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

static struct cg_coll_slot *slot_get(struct cg_coll_comm *r, const struct cg_coll_call *c)
{
	uint64_t h = key_hash(c);
	for (int p = 0; p < PROBES; p++) {
		struct cg_coll_slot *s = &r->slots[(h + (uint64_t)p) % SLOTS];
		if (!s->hash) {
			*s = (struct cg_coll_slot){ .hash = h, .entry = c->entry, .nw = c->nw, .epoch = -1 };
			memcpy(s->w, c->w, sizeof(s->w));
			return s;
		}
		if (s->hash == h && s->entry == c->entry && s->nw == c->nw &&
		    memcmp(s->w, c->w, sizeof(s->w)) == 0)
			return s;
	}
	return NULL; /* table crowded: this call votes EAGER, which the others then follow */
}

/* --- counting and reporting --------------------------------------------------------------- */
/* Relaxed atomics: records of different communicators count into `total` concurrently, and the
 * summary reads them while a collective may still run on another thread. */
#define COUNT(r, field) (__atomic_fetch_add(&(r)->n.field, 1, __ATOMIC_RELAXED), \
                         __atomic_fetch_add(&total.field, 1, __ATOMIC_RELAXED))

static void report_vote(struct cg_coll_comm *r, const struct cg_coll_call *c, const char *outcome,
                        enum cg_reason why, int64_t local, int64_t max, int64_t min)
{
	__atomic_fetch_add(&fallbacks[why], 1, __ATOMIC_RELAXED);
	if (!cg_report_active() || !cg_report_first("vote", (uint64_t)why, 8))
		return;
	struct cg_json *j = cg_json_take();
	cg_json_begin(j, "vote");
	cg_json_uint(j, "comm", r->id);
	cg_json_int(j, "rank", r->rank);
	cg_json_int(j, "nranks", r->nranks);
	cg_json_uint(j, "vote", r->n.votes);
	cg_json_str(j, "api", c->api);
	cg_json_str(j, "outcome", outcome);
	cg_json_int(j, "local", local);
	cg_json_int(j, "max", max);
	cg_json_int(j, "min", min);
	cg_json_str(j, "reason", cg_reason_name(why));
	cg_json_str(j, "hint", cg_reason_hint(why));
	if (cg_json_end(j))
		cg_report_emit(j);
	cg_json_give(j);
}

/* No more votes on this communicator: every later collective runs eagerly, on every rank. */
static void switch_off(struct cg_coll_comm *r, enum cg_reason why)
{
	r->off = true;
	r->off_why = why;
	/* The voter stays until the communicator goes: a peer may still be reading this vote. */
	for (int k = 0; k < SLOTS; k++)
		drop_graph(&r->slots[k]);
	cg_log(CG_LOG_WARN, "collectives on communicator %u (rank %d of %d) run eagerly from now on: %s",
	       r->id, r->rank, r->nranks, cg_reason_name(why));
}

/* One vote; false when there is no agreement to act on (the communicator may now be off). */
static bool vote(struct cg_coll_comm *r, const struct cg_coll_call *c, int64_t local,
                 int64_t *agreed)
{
	int64_t max = 0, min = 0;
	enum cg_vote_result v = cg_vote(r->voter, local, &max, &min);
	COUNT(r, votes);
	if (v != CG_VOTE_OK) {
		enum cg_reason why = v == CG_VOTE_TIMEOUT ? CG_R_VOTE_TIMEOUT : CG_R_VOTE_UNAVAILABLE;
		if (v == CG_VOTE_TIMEOUT)
			COUNT(r, timed_out);
		r->voter = NULL; /* its thread releases it (after a timeout: once its call returns) */
		report_vote(r, c, v == CG_VOTE_TIMEOUT ? "timeout" : "failed", why, local, 0, 0);
		switch_off(r, why);
		return false;
	}
	if (max != min) {
		COUNT(r, declined);
		report_vote(r, c, "declined", CG_R_VOTE_DECLINED, local, max, min);
		if (++r->declines >= MAX_DECLINES)
			switch_off(r, CG_R_VOTE_DECLINED);
		return false;
	}
	COUNT(r, agreed);
	*agreed = max;
	return true;
}

/* Back to warmup on every rank at once, so that the ranks re-converge in lockstep. */
static void reset_slot(struct cg_coll_slot *s)
{
	drop_graph(s);
	s->seen = 0;
}

/* --- the collective ------------------------------------------------------------------------ */
static bool launch(struct cg_coll_slot *s, CUstream stream)
{
	int in = cg_ctx_enter(s->ctx);
	CUresult e = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : CG_REAL(cuGraphLaunch)(s->exec, stream);
	cg_ctx_leave(in);
	return e == CUDA_SUCCESS;
}

static bool begin_capture(struct cg_coll_comm *r, struct cg_coll_call *c)
{
	CUcontext ctx = NULL;
	c->capture = NULL;
	if (CG_REAL(cuStreamGetCtx)(c->stream, &ctx) != CUDA_SUCCESS || !ctx)
		return false;
	int in = cg_ctx_enter(ctx);
	if (in == CG_CTX_FAILED)
		return false;
	if (r->capture && r->capture_ctx != ctx) {
		CG_REAL(cuStreamDestroy_v2)(r->capture);
		r->capture = NULL;
	}
	CUresult e = CUDA_SUCCESS;
	if (!r->capture)
		e = CG_REAL(cuStreamCreate)(&r->capture, CU_STREAM_NON_BLOCKING);
	r->capture_ctx = r->capture ? ctx : NULL;
	if (e == CUDA_SUCCESS)
		e = CG_REAL(cuStreamBeginCapture_v2)(r->capture, CU_STREAM_CAPTURE_MODE_RELAXED);
	cg_ctx_leave(in);
	c->slot->ctx = ctx;
	c->capture = e == CUDA_SUCCESS ? r->capture : NULL;
	return e == CUDA_SUCCESS;
}

/* The program captures this stream itself: by NCCL's rule every rank does, at this same
 * collective, so every rank skips the vote here. */
static bool program_capturing(const struct cg_coll_call *c)
{
	CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
	return atomic_load(&cg_shim.captures) > 0 &&
	       (CG_REAL(cuStreamIsCapturing)(c->stream, &cs) != CUDA_SUCCESS ||
	        cs != CU_STREAM_CAPTURE_STATUS_NONE);
}

/* The communicator's voter, started at its first collective, which every rank reaches. false:
 * none could be started, and the communicator is off. */
static bool voter_ready(struct cg_coll_comm *r, const struct cg_coll_call *c,
                        const struct cg_vote_nccl *nccl)
{
	if (r->voter)
		return true;
	CUcontext ctx = NULL;
	CG_REAL(cuCtxGetCurrent)(&ctx);
	enum cg_vote_result why;
	r->voter = cg_voter_start(nccl, c->comm, ctx, (long)cg_opt_int(CG_OPT_VOTE_TIMEOUT_MS), &why);
	if (!r->voter) {
		enum cg_reason reason = why == CG_VOTE_TIMEOUT ? CG_R_VOTE_TIMEOUT : CG_R_VOTE_UNAVAILABLE;
		report_vote(r, c, why == CG_VOTE_TIMEOUT ? "timeout" : "unavailable", reason, 0, 0, 0);
		switch_off(r, reason);
		return false;
	}
	r->rank = cg_voter_rank(r->voter);
	r->nranks = cg_voter_nranks(r->voter);
	return true;
}

/* The vote on this call: replayed from its graph (DONE), to be captured (CAPTURE: the call's
 * slot is set), or eager on every rank. */
static enum cg_coll_act vote_call(struct cg_coll_comm *r, struct cg_coll_call *c)
{
	struct cg_coll_slot *s = slot_get(r, c);
	int64_t local = V_EAGER, agreed;
	if (s && ++s->seen >= (uint32_t)cg_opt_int(CG_OPT_WARMUP))
		local = s->epoch < 0 ? V_CAPTURE : V_REPLAY + s->epoch;
	int64_t epoch = (int64_t)r->n.votes;
	if (!vote(r, c, local, &agreed)) {
		/* Every collective of the communicator, not just this one: the ranks may disagree
		 * because of another key (one rank's call changed), and must restart in lockstep. */
		for (int k = 0; !r->off && k < SLOTS; k++)
			reset_slot(&r->slots[k]);
		return CG_COLL_EAGER;
	}
	if (agreed >= V_REPLAY) {
		if (launch(s, c->stream)) {
			COUNT(r, graphed);
			return CG_COLL_DONE;
		}
		/* The others replay: this rank's eager call may not pair with them (VOTE.md). */
		report_vote(r, c, "launch_failed", CG_R_LAUNCH_FAILED, local, agreed, agreed);
		reset_slot(s);
	} else if (agreed == V_CAPTURE) {
		c->rec = r;
		c->slot = s;
		s->epoch = epoch;
		return CG_COLL_CAPTURE;
	}
	return CG_COLL_EAGER;
}

enum cg_coll_act cg_coll_begin_or_lock(struct cg_coll_call *c, const struct cg_vote_nccl *nccl)
{
	struct cg_coll_comm *r = comm_get(c->comm);
	if (!r)
		return CG_COLL_EAGER; /* out of memory: this rank skips the vote, the others time out */
	pthread_mutex_lock(&r->lock);
	COUNT(r, seen);
	enum cg_coll_act act = CG_COLL_EAGER;
	if (!r->off && !program_capturing(c) && voter_ready(r, c, nccl))
		act = vote_call(r, c);
	if (act == CG_COLL_CAPTURE && !begin_capture(r, c))
		return cg_coll_captured(c, ncclInternalError); /* unlocks */
	if (act != CG_COLL_CAPTURE)
		pthread_mutex_unlock(&r->lock);
	return act; /* CAPTURE: still locked, cg_coll_captured unlocks */
}

enum cg_coll_act cg_coll_captured(struct cg_coll_call *c, ncclResult_t result)
{
	struct cg_coll_comm *r = c->rec;
	struct cg_coll_slot *s = c->slot;
	bool ok = result == ncclSuccess;
	int in = cg_ctx_enter(s->ctx);
	if (c->capture) {
		CUgraph g = NULL;
		s->exec = NULL;
		CUresult e = CG_REAL(cuStreamEndCapture)(c->capture, &g);
		s->graph = g;
		ok = ok && e == CUDA_SUCCESS && g &&
		     CG_REAL(cuGraphInstantiateWithFlags)(&s->exec, g, 0) == CUDA_SUCCESS;
	}
	cg_ctx_leave(in);
	/* Second vote: a graph on every rank, or the call eagerly on every rank. */
	int64_t agreed;
	enum cg_coll_act act = CG_COLL_EAGER;
	if (!vote(r, c, ok, &agreed)) {
		if (!r->off)
			reset_slot(s);
	} else if (agreed != 1) {
		report_vote(r, c, "capture_failed", CG_R_BUILD_FAILED, ok, agreed, agreed);
		reset_slot(s);
		if (++r->declines >= MAX_DECLINES) /* every rank saw this same result */
			switch_off(r, CG_R_BUILD_FAILED);
	} else if (launch(s, c->stream)) {
		COUNT(r, captured);
		COUNT(r, graphed);
		act = CG_COLL_DONE;
	} else {
		report_vote(r, c, "launch_failed", CG_R_LAUNCH_FAILED, ok, agreed, agreed);
		reset_slot(s);
	}
	pthread_mutex_unlock(&r->lock);
	return act;
}

void cg_coll_comm_gone(ncclComm_t comm)
{
	pthread_mutex_lock(&table_lock);
	struct cg_coll_comm *r = NULL;
	for (unsigned i = 0; i < n_comms && !r; i++)
		if (comms[i].comm == comm && !comms[i].gone)
			r = &comms[i];
	pthread_mutex_unlock(&table_lock);
	if (!r)
		return;
	cg_voters_leave_parent(comm, leave_wait_ms());
	pthread_mutex_lock(&r->lock);
	if (r->voter)
		cg_voter_stop(r->voter);
	r->voter = NULL;
	for (int k = 0; k < SLOTS; k++)
		drop_graph(&r->slots[k]);
	if (r->capture) {
		int in = cg_ctx_enter(r->capture_ctx);
		CG_REAL(cuStreamDestroy_v2)(r->capture);
		cg_ctx_leave(in);
		r->capture = NULL;
	}
	pthread_mutex_unlock(&r->lock);
	pthread_mutex_lock(&table_lock);
	r->gone = true;
	pthread_mutex_unlock(&table_lock);
}

static void json_counts(struct cg_json *j, const struct counts *n)
{
	cg_json_uint(j, "seen", n->seen);
	cg_json_uint(j, "graphed", n->graphed);
	cg_json_uint(j, "captured", n->captured);
	cg_json_uint(j, "votes", n->votes);
	cg_json_uint(j, "agreed", n->agreed);
	cg_json_uint(j, "declined", n->declined);
	cg_json_uint(j, "timed_out", n->timed_out);
}

void cg_coll_json(struct cg_json *j)
{
	if (!cg_opt_scope()->collectives)
		return;
	pthread_mutex_lock(&table_lock);
	cg_json_uint(j, "collectives_graphed", total.graphed);
	cg_json_obj(j, "votes");
	cg_json_uint(j, "held", total.votes);
	cg_json_uint(j, "agreed", total.agreed);
	cg_json_uint(j, "declined", total.declined);
	cg_json_uint(j, "timed_out", total.timed_out);
	cg_json_obj_end(j);
	cg_json_obj(j, "collective_graphs");
	cg_json_uint(j, "seen", total.seen);
	cg_json_uint(j, "captured", total.captured);
	cg_json_obj(j, "fallbacks");
	for (int k = 1; k < CG_R_COUNT; k++)
		if (fallbacks[k])
			cg_json_uint(j, cg_reason_name((enum cg_reason)k), fallbacks[k]);
	cg_json_obj_end(j);
	cg_json_arr(j, "comms");
	for (unsigned i = 0; i < n_comms; i++) {
		const struct cg_coll_comm *r = &comms[i];
		cg_json_obj(j, NULL);
		cg_json_uint(j, "comm", r->id);
		cg_json_int(j, "rank", r->rank);
		cg_json_int(j, "nranks", r->nranks);
		json_counts(j, &r->n);
		cg_json_str(j, "off", r->off ? cg_reason_name(r->off_why) : NULL);
		cg_json_obj_end(j);
	}
	cg_json_arr_end(j);
	cg_json_obj_end(j);
	pthread_mutex_unlock(&table_lock);
}
