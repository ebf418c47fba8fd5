/* The voter (vote.h): one thread per program communicator that owns the vote communicator, its
 * stream and buffers. The caller hands it one request and waits for one answer (a condition
 * variable each way, no allocation per vote) with a deadline, because any NCCL call may block
 * the host while a peer is missing. A voter struct is never freed (a few hundred bytes per
 * communicator): after a timeout its thread may still be inside NCCL and must find it there. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/prctl.h>

#include "shim/base/deadline.h"
#include "shim/loader/driver.h"
#include "shim/base/log.h"
#include "shim/base/shim.h"
#include "vote.h"

enum phase { ASKED, ANSWERED };
enum op { OP_SETUP, OP_VOTE, OP_STOP };

struct cg_voter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum phase phase;
	enum op op;
	bool abandoned;      /* the caller stopped waiting: nobody reads answers any more */
	bool exited;         /* the thread released its resources and returned */
	bool in_parent;      /* the thread is inside an NCCL call on `parent` (the split) */
	struct cg_voter *next_all; /* every voter ever started (none is freed) */
	enum cg_vote_result result;
	int64_t in, max, min;
	long timeout_ms;
	const struct cg_vote_nccl *nccl;
	ncclComm_t parent, vcomm;
	CUcontext ctx;
	CUstream stream;
	CUdeviceptr dev;
	int64_t *host;       /* pinned: {v, -v} going out, {max, -min} coming back */
	int rank, nranks;
};

static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cg_voter *all_voters;

static enum cg_vote_result setup(struct cg_voter *v)
{
	const struct cg_vote_nccl *n = v->nccl;
	if (n->user_rank(v->parent, &v->rank) != ncclSuccess ||
	    n->count(v->parent, &v->nranks) != ncclSuccess)
		return CG_VOTE_FAILED;
	/* One color, ordered by the parent's rank: the same ranks, a separate NCCL sequence. */
	ncclComm_t vc = NULL;
	if (n->split(v->parent, 0, v->rank, &vc, NULL) != ncclSuccess || !vc)
		return CG_VOTE_FAILED;
	pthread_mutex_lock(&v->lock);
	v->vcomm = vc;
	pthread_mutex_unlock(&v->lock);
	if (CG_REAL(cuStreamCreate)(&v->stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    CG_REAL(cuMemAlloc_v2)(&v->dev, 2 * sizeof(int64_t)) != CUDA_SUCCESS ||
	    CG_REAL(cuMemHostAlloc)((void **)&v->host, 2 * sizeof(int64_t), 0) != CUDA_SUCCESS)
		return CG_VOTE_FAILED;
	return CG_VOTE_OK;
}

static enum cg_vote_result vote_once(struct cg_voter *v, int64_t value)
{
	v->host[0] = value;
	v->host[1] = -value;
	if (CG_REAL(cuMemcpyHtoDAsync_v2)(v->dev, v->host, 2 * sizeof(int64_t), v->stream) != CUDA_SUCCESS ||
	    v->nccl->all_reduce((void *)v->dev, (void *)v->dev, 2, ncclInt64, ncclMax, v->vcomm,
	                        (cudaStream_t)v->stream) != ncclSuccess ||
	    CG_REAL(cuMemcpyDtoHAsync_v2)(v->host, v->dev, 2 * sizeof(int64_t), v->stream) != CUDA_SUCCESS ||
	    CG_REAL(cuStreamSynchronize)(v->stream) != CUDA_SUCCESS)
		return CG_VOTE_FAILED;
	return CG_VOTE_OK;
}

/* The stream and buffers, and the vote communicator unless the caller aborted it already:
 * destroyed on a normal stop (a peer may still be finishing the last vote, which an abort could
 * break), aborted after a failure (a peer may be gone, and destroy could wait for it). */
static void release(struct cg_voter *v, bool end_vcomm, bool stop)
{
	if (end_vcomm)
		(stop ? v->nccl->destroy : v->nccl->abort)(v->vcomm);
	if (v->stream)
		CG_REAL(cuStreamDestroy_v2)(v->stream);
	if (v->dev)
		CG_REAL(cuMemFree_v2)(v->dev);
	if (v->host)
		CG_REAL(cuMemFreeHost)(v->host);
}

static void *voter_main(void *arg)
{
	struct cg_voter *v = arg;
	prctl(PR_SET_NAME, "cugraft-vote");
	cg_tls.internal++; /* everything this thread does is the shim's own */
	if (v->ctx)
		CG_REAL(cuCtxSetCurrent)(v->ctx);
	enum cg_vote_result r = setup(v);
	pthread_mutex_lock(&v->lock);
	v->in_parent = false;
	pthread_cond_broadcast(&v->cond);
	for (;;) {
		if (!v->abandoned) {
			v->result = r;
			v->max = v->host && r == CG_VOTE_OK ? v->host[0] : 0;
			v->min = v->host && r == CG_VOTE_OK ? -v->host[1] : 0;
			v->phase = ANSWERED;
			pthread_cond_broadcast(&v->cond);
		}
		if (v->abandoned || r != CG_VOTE_OK)
			break;
		while (v->phase != ASKED)
			pthread_cond_wait(&v->cond, &v->lock);
		if (v->op == OP_STOP)
			break;
		int64_t value = v->in;
		pthread_mutex_unlock(&v->lock);
		r = vote_once(v, value);
		pthread_mutex_lock(&v->lock);
	}
	bool end_vcomm = v->vcomm != NULL;
	bool stop = !v->abandoned && r == CG_VOTE_OK && v->op == OP_STOP;
	pthread_mutex_unlock(&v->lock);
	release(v, end_vcomm, stop);
	pthread_mutex_lock(&v->lock);
	v->exited = true;
	pthread_cond_broadcast(&v->cond);
	pthread_mutex_unlock(&v->lock);
	return NULL;
}

/* Waits (lock held) for the answer to the request just posted. On the deadline the voter is
 * abandoned; its vote communicator is NOT aborted here: the voter thread may be inside (or about
 * to enter) an NCCL call on it, and an abort from this thread would free the communicator under
 * that call. The voter thread aborts it itself if the call ever returns. */
static enum cg_vote_result await(struct cg_voter *v, int64_t *max, int64_t *min)
{
	struct timespec until = cg_deadline_ms(v->timeout_ms);
	int rc = 0;
	while (v->phase == ASKED && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&v->cond, &v->lock, &until);
	if (v->phase == ANSWERED) {
		enum cg_vote_result r = v->result;
		*max = v->max;
		*min = v->min;
		pthread_mutex_unlock(&v->lock);
		return r;
	}
	v->abandoned = true;
	pthread_mutex_unlock(&v->lock);
	return CG_VOTE_TIMEOUT;
}

struct cg_voter *cg_voter_start(const struct cg_vote_nccl *nccl, ncclComm_t comm, CUcontext ctx,
                                long timeout_ms, enum cg_vote_result *why)
{
	*why = CG_VOTE_FAILED;
	if (!nccl->split)
		return NULL;
	struct cg_voter *v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	pthread_mutex_init(&v->lock, NULL);
	pthread_cond_init(&v->cond, NULL);
	v->nccl = nccl;
	v->parent = comm;
	v->ctx = ctx;
	v->timeout_ms = timeout_ms;
	v->phase = ASKED;
	v->op = OP_SETUP;
	v->in_parent = true;
	pthread_mutex_lock(&all_lock);
	v->next_all = all_voters;
	all_voters = v;
	pthread_mutex_unlock(&all_lock);

	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals go to its own threads */
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* NCCL's communicator set-up (ncclCommSplit runs here) needs a full-size stack: with 256 KB
	 * the first vote crashed on the H200. */
	pthread_attr_setstacksize(&attr, 8 << 20);
	pthread_t t;
	int rc = pthread_create(&t, &attr, voter_main, v);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) { /* stays on the list, never in a call */
		v->in_parent = false;
		return NULL;
	}
	int64_t unused_max, unused_min;
	pthread_mutex_lock(&v->lock);
	*why = await(v, &unused_max, &unused_min);
	return *why == CG_VOTE_OK ? v : NULL;
}

enum cg_vote_result cg_vote(struct cg_voter *v, int64_t value, int64_t *max, int64_t *min)
{
	pthread_mutex_lock(&v->lock);
	if (v->abandoned || v->exited || v->phase != ANSWERED) {
		pthread_mutex_unlock(&v->lock);
		return CG_VOTE_FAILED;
	}
	v->in = value;
	v->op = OP_VOTE;
	v->phase = ASKED;
	pthread_cond_broadcast(&v->cond);
	return await(v, max, min); /* unlocks */
}

int cg_voter_rank(const struct cg_voter *v)
{
	return v->rank;
}

int cg_voter_nranks(const struct cg_voter *v)
{
	return v->nranks;
}

void cg_voter_stop(struct cg_voter *v)
{
	pthread_mutex_lock(&v->lock);
	if (v->abandoned || v->exited || v->phase != ANSWERED) {
		pthread_mutex_unlock(&v->lock);
		return;
	}
	v->op = OP_STOP;
	v->phase = ASKED;
	pthread_cond_broadcast(&v->cond);
	/* ncclCommDestroy may wait for a peer: bounded, so a dead peer cannot hang the program. */
	struct timespec until = cg_deadline_ms(v->timeout_ms);
	int rc = 0;
	while (!v->exited && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&v->cond, &v->lock, &until);
	if (v->exited) {
		pthread_mutex_unlock(&v->lock);
		return;
	}
	pthread_mutex_unlock(&v->lock);
	/* Not aborted as well: that would free what the destroy still uses. */
	cg_log(CG_LOG_WARN, "the vote communicator was not destroyed within %ld ms; left behind",
	       v->timeout_ms);
}

void cg_voters_leave_parent(ncclComm_t parent, long wait_ms)
{
	pthread_mutex_lock(&all_lock);
	struct cg_voter *list = all_voters;
	pthread_mutex_unlock(&all_lock);
	for (struct cg_voter *v = list; v; v = v->next_all) {
		if (parent && v->parent != parent)
			continue;
		pthread_mutex_lock(&v->lock);
		struct timespec until = cg_deadline_ms(wait_ms);
		int rc = 0;
		while (v->in_parent && rc != ETIMEDOUT)
			rc = pthread_cond_timedwait(&v->cond, &v->lock, &until);
		bool stuck = v->in_parent;
		pthread_mutex_unlock(&v->lock);
		if (stuck)
			cg_log(CG_LOG_WARN, "a vote thread is still inside ncclCommSplit after %ld ms "
			       "(a rank is missing?): the communicator goes from under it", wait_ms);
	}
}
