/* The record the shim keeps for one program stream, shared by the stream registry (registry.h),
 * which owns it, and the backend (cuda_backend.h, ptds.h), which submits its work. A leaf: it
 * names no function of either. */
#ifndef CG_SHIM_SSTATE_H
#define CG_SHIM_SSTATE_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy/engine.h"
#include "shim/base/shim.h"

struct cg_exec;

/* How a per-thread default stream's deferred work reaches the GPU from another thread (ptds.h). */
struct cg_ptds {
	CUstream proxy;
	CUevent fence;      /* on the stream, after all its submitted work, while work is deferred */
	CUevent handback;   /* on the proxy, after the work submitted there */
	bool fence_ok;      /* the fence covers everything submitted to the stream so far */
	bool proxy_open;    /* this flush (another thread) made the proxy wait and submits there */
	bool redirected;    /* the owner must catch up before it next uses the stream */
};

struct cg_sstate {
	pthread_mutex_t lock;      /* held around every engine call for this stream */
	CUstream handle;           /* what we submit to: the program's handle, or CU_STREAM_LEGACY */
	CUcontext ctx;
	CUstream capture;          /* private stream the backend captures chunk graphs on */
	struct cg_exec *execs;     /* executables other chunks' graphs may run on (cuda_backend.c) */
	struct cg_timing *timing;  /* the backend's cost-gate samples (timing.c), or NULL */
	uint64_t id;               /* small number naming the stream in the report */
	bool legacy;               /* the context's legacy default stream */
	bool blocking;             /* synchronises with the legacy stream */
	bool per_thread;           /* a per-thread default stream: only `owner` can name it */
	bool live;
	uint64_t owner;            /* the thread (cg_thread_uid) of a per-thread stream */
	struct cg_ptds ptds;       /* per-thread streams: how other threads reach it (ptds.h) */
	struct cg_stream *eng;     /* engine state, or NULL: its ops run eagerly, for `why_eager` */
	enum cg_reason why_eager;  /* SCOPE (CUGRAFT_SCOPE), PER_THREAD (no proxy) or NO_MEMORY */
	atomic_bool pending;       /* the engine holds deferred work (mirrored after each call) */
	_Atomic uint64_t pending_seq; /* when that work began, in the process's submission order */
	bool flush_mark;           /* flush_where's choice (registry.c; the registry lock guards it) */
	_Atomic unsigned char calm; /* enum cg_calm: what a boundary now would change */
	_Atomic uint64_t ops;      /* ops seen on this stream */
	struct cg_sstate *next;
};

static inline bool cg_stream_mine(const struct cg_sstate *s)
{
	return s->owner == cg_thread_uid();
}

#endif
