/* The stream registry (registry.h). Lookups hit a small per-thread cache (cg_tls.streams); misses
 * and every cross-stream operation take the registry lock, then one stream lock at a time (never
 * two), so the order registry -> stream is the only lock order. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shim/context/context.h"
#include "shim/loader/driver.h"
#include "shim/base/shim.h"
#include "registry.h"
#include "shim/backend/timing.h"
#include "shim/backend/cuda_backend.h"
#include "shim/base/deadline.h"
#include "shim/backend/events.h"
#include "shim/backend/nvtx.h"
#include "shim/base/options.h"
#include "shim/backend/ptds.h"

static pthread_mutex_t registry = PTHREAD_MUTEX_INITIALIZER;
static struct cg_sstate *streams;   /* live records */
static struct cg_sstate *recycled;  /* forgotten records, reused for new streams */
static _Atomic unsigned registry_gen = 1;
static _Atomic uint64_t next_id = 1;

/* How many streams hold deferred work. */
static atomic_int any_pending;
/* The order in which streams began to hold deferred work: flushes go oldest first. */
static _Atomic uint64_t pending_clock;
/* Live records not CG_SETTLED (`calm`): while none is, a boundary changes nothing anywhere
 * (no stream has work deferred or a chunk still to be marked by a wait), and the boundaries that
 * come here skip the stream lookup. Those CG_BUSY are counted in cg_unsettled (shim.h): while
 * none is, a boundary that is not a wait changes nothing, and the forwarded ones do not even come
 * here. Each changes at most twice per stream between two boundaries. */
static atomic_int unsettled;

static void count_busy(bool more)
{
	if (more)
		atomic_fetch_add(&cg_unsettled, 1);
	else
		atomic_fetch_sub(&cg_unsettled, 1);
}

bool cg_any_pending(void)
{
	return atomic_load_explicit(&any_pending, memory_order_acquire) > 0;
}

/* --- lookup -------------------------------------------------------------------------------- */
enum kind { CREATED, LEGACY, PER_THREAD };

/* A thread that used its per-thread stream exits: nobody can name that stream any more. Its
 * record is orphaned (owner 0): what is still deferred there goes out through the proxy like any
 * other thread's flush (the flusher's timeout at the latest), then the flusher retires it
 * (cg_stream_reap), so a program that keeps starting threads does not keep their proxies and
 * graphs. No driver call here: the driver's own per-thread state may be gone already. */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static atomic_int orphans;

static void thread_gone(void *unused)
{
	uint64_t me = cg_thread_uid();
	pthread_mutex_lock(&registry);
	for (struct cg_sstate *s = streams; s; s = s->next) {
		if (!s->per_thread || s->owner != me)
			continue;
		pthread_mutex_lock(&s->lock);
		s->owner = 0;
		pthread_mutex_unlock(&s->lock);
		atomic_fetch_add(&orphans, 1);
	}
	pthread_mutex_unlock(&registry);
	if (atomic_load(&orphans) > 0 && atomic_load(&cg_shim.flusher_idle))
		cg_shim.wake_flusher(); /* to retire them */
}

static void make_exit_key(void)
{
	if (pthread_key_create(&exit_key, thread_gone) != 0)
		exit_key = (pthread_key_t)-1;
}

static void watch_thread_exit(void)
{
	pthread_once(&exit_key_once, make_exit_key);
	if (exit_key != (pthread_key_t)-1)
		pthread_setspecific(exit_key, (void *)1);
}

static struct cg_sstate *find_locked(CUstream h, CUcontext ctx, enum kind k)
{
	for (struct cg_sstate *s = streams; s; s = s->next) {
		if (k == CREATED && s->handle == h && !s->legacy && !s->per_thread)
			return s;
		if (k == LEGACY && s->legacy && s->ctx == ctx)
			return s;
		if (k == PER_THREAD && s->per_thread && s->ctx == ctx && cg_stream_mine(s))
			return s;
	}
	return NULL;
}

static struct cg_sstate *create_locked(CUstream h, CUcontext ctx, enum kind k)
{
	struct cg_sstate *s = recycled;
	if (s)
		recycled = s->next;
	else if (!(s = calloc(1, sizeof(*s))))
		return NULL;
	else
		pthread_mutex_init(&s->lock, NULL);
	/* A new record is not settled until its first boundary (nor counted before now: a
	 * recycled one was settled by retire, a new one is zeroed). */
	atomic_store(&s->calm, CG_BUSY);
	atomic_fetch_add(&unsettled, 1);
	count_busy(true);
	s->handle = k == LEGACY ? CU_STREAM_LEGACY : k == PER_THREAD ? CU_STREAM_PER_THREAD : h;
	s->ctx = ctx;
	cg_events_device(ctx); /* the summary names the devices used */
	s->capture = NULL;
	s->ptds = (struct cg_ptds){ 0 };
	s->legacy = k == LEGACY;
	s->per_thread = k == PER_THREAD;
	s->blocking = true;
	s->owner = cg_thread_uid();
	s->id = atomic_fetch_add(&next_id, 1);
	atomic_store(&s->pending, false);
	atomic_store(&s->ops, 0);
	if (k == CREATED) {
		unsigned flags = 0;
		cg_tls.internal++;
		if (CG_REAL(cuStreamGetFlags)(h, &flags) == CUDA_SUCCESS)
			s->blocking = !(flags & CU_STREAM_NON_BLOCKING);
		cg_tls.internal--;
	}
	/* Streams CUGRAFT_SCOPE leaves out are only recorded; so are per-thread streams whose
	 * proxy (the way other threads reach their work, ptds.h) could not be made. */
	if (k == PER_THREAD)
		watch_thread_exit();
	s->why_eager = !cg_scope_stream(s->id) ? CG_R_SCOPE
	             : k == PER_THREAD && !cg_ptds_open(s) ? CG_R_PER_THREAD
	             : CG_R_NO_MEMORY; /* what a NULL engine (state) means otherwise */
	s->eng = s->why_eager != CG_R_NO_MEMORY || !cg_shim.engine ? NULL :
	         cg_stream_new(cg_shim.engine, s, s->id);
	s->live = true;
	s->next = streams;
	streams = s;
	return s;
}

static struct cg_sstate *stream_find(CUstream h, enum kind k, CUstream key,
                                     CUcontext ctx, unsigned gen, unsigned way)
	__attribute__((noinline));

struct cg_sstate *cg_stream_get(CUstream h, bool ptsz)
{
	enum kind k = CREATED;
	if (h == CU_STREAM_LEGACY || (h == NULL && !ptsz))
		k = LEGACY;
	else if (h == CU_STREAM_PER_THREAD || h == NULL)
		k = PER_THREAD;
	CUcontext ctx = NULL;
	if (k != CREATED && CG_REAL(cuCtxGetCurrent)(&ctx) != CUDA_SUCCESS)
		return NULL;
	CUstream key = k == CREATED ? h : k == LEGACY ? CU_STREAM_LEGACY : CU_STREAM_PER_THREAD;

	unsigned gen = atomic_load_explicit(&registry_gen, memory_order_acquire);
	unsigned way = (unsigned)(((uintptr_t)key ^ (uintptr_t)ctx) >> 4) % CG_TLS_STREAM_WAYS;
	if (cg_tls.streams[way].h == key && cg_tls.streams[way].ctx == ctx &&
	    cg_tls.streams[way].gen == gen)
		return cg_tls.streams[way].s;
	return stream_find(h, k, key, ctx, gen, way);
}

/* cg_stream_get past this thread's cache: the registry (its own function, so that the
 * cache's hit saves and restores no registers). */
static struct cg_sstate *stream_find(CUstream h, enum kind k, CUstream key,
                                     CUcontext ctx, unsigned gen, unsigned way)
{
	struct cg_sstate *s = NULL;
	pthread_mutex_lock(&registry);
	s = find_locked(h, ctx, k);
	if (!s && k == CREATED) {
		cg_tls.internal++;
		CUresult r = CG_REAL(cuStreamGetCtx)(h, &ctx);
		cg_tls.internal--;
		if (r != CUDA_SUCCESS) {
			pthread_mutex_unlock(&registry);
			return NULL;
		}
	}
	if (!s)
		s = create_locked(h, ctx, k);
	pthread_mutex_unlock(&registry);
	if (s) {
		/* Keyed as looked up: a created stream's context is not part of its key. */
		cg_tls.streams[way].h = key;
		cg_tls.streams[way].ctx = k == CREATED ? NULL : ctx;
		cg_tls.streams[way].s = s;
		cg_tls.streams[way].gen = gen;
	}
	return s;
}

/* --- the engine's flushes --------------------------------------------------------------------- */
/* Every engine call that may submit a stream's pending work goes through here, so that with
 * CUGRAFT_NVTX on, one with work pending is the NVTX range "flush <reason>", and each marks the
 * ops run eagerly (nvtx.h). The stream's lock is held. */
enum engine_flush { ENGINE_FLUSH, ENGINE_CUT, ENGINE_FREE };

static void engine_flush(struct cg_sstate *s, enum cg_reason why, enum engine_flush how)
{
	bool mark = cg_nvtx_on();
	if (mark)
		cg_nvtx_flush_begin(why, cg_stream_pending(s->eng));
	if (how == ENGINE_CUT)
		cg_boundary(s->eng, why);
	else if (how == ENGINE_FLUSH)
		cg_flush(s->eng, why);
	else
		cg_stream_free(s->eng, why);
	if (mark)
		cg_nvtx_flush_end();
}

/* --- pending bookkeeping ------------------------------------------------------------------- */
/* A per-thread stream's redirect finished and its fence kept (ptds.h). */
static void settle_per_thread(struct cg_sstate *s)
{
	bool p = s->eng && cg_stream_pending(s->eng);
	if (!cg_ptds_settle(s, p)) {
		engine_flush(s, CG_R_PER_THREAD, ENGINE_FLUSH); /* nobody else could submit it: now */
		cg_ptds_settle(s, cg_stream_pending(s->eng));
	}
}

void cg_stream_sync_pending(struct cg_sstate *s)
{
	/* First: the stream's settling below must come after its hand-back is counted, or
	 * another thread's forwarded boundary could find the process settled in between. */
	if (s->per_thread)
		settle_per_thread(s);
	/* One writer (the lock holder): stored, and counted, only when it changes. */
	enum cg_calm calm = s->eng ? cg_stream_calm(s->eng) : CG_SETTLED;
	enum cg_calm was = atomic_load_explicit(&s->calm, memory_order_relaxed);
	if (calm != was) {
		atomic_store_explicit(&s->calm, calm, memory_order_release);
		if ((calm == CG_SETTLED) != (was == CG_SETTLED))
			atomic_fetch_add(&unsettled, calm == CG_SETTLED ? -1 : 1);
		if ((calm == CG_BUSY) != (was == CG_BUSY))
			count_busy(calm == CG_BUSY);
	}
	bool p = s->eng && cg_stream_pending(s->eng);
	if (p == atomic_load_explicit(&s->pending, memory_order_relaxed))
		return;
	if (p)
		atomic_store_explicit(&s->pending_seq, atomic_fetch_add(&pending_clock, 1) + 1,
		                      memory_order_relaxed);
	atomic_store_explicit(&s->pending, p, memory_order_release);
	int d = p ? 1 : -1;
	/* Sequentially consistent, as the flusher's store of flusher_idle and its load of
	 * any_pending: one of the two sides sees the other, so no wake-up is lost. */
	if (atomic_fetch_add(&any_pending, d) == 0 && p && atomic_load(&cg_shim.flusher_idle))
		cg_shim.wake_flusher();
}

/* What flush_where does to a stream it picks: flush its pending work; make a boundary there
 * (flush and cut); or a boundary only where the work pending is deferred for a graph (a point
 * that the program's pending work makes a boundary): work merely held back for a cost-gate
 * sample while its chunk is learned would not have been pending without the sample, so it is
 * only flushed, and the chunk is learned as it would have been. */
enum flush_how { FLUSH, CUT, CUT_DEFERRED, ORDER };

/* ORDER: as CUT_DEFERRED, but a stream another thread is in right now is left to it: that
 * thread's call and this one are concurrent, with no order between them to keep (and it may be
 * held inside the driver: waiting for it could wait forever). */
static void flush_one(struct cg_sstate *s, enum cg_reason why, enum flush_how how)
{
	if (how != ORDER)
		pthread_mutex_lock(&s->lock); /* eng re-read under the lock: exit may retire it */
	else if (pthread_mutex_trylock(&s->lock) != 0)
		return;
	int in = s->eng ? cg_ctx_enter(s->ctx) : CG_CTX_FAILED;
	bool cut = how == CUT ||
	           ((how == CUT_DEFERRED || how == ORDER) && s->eng && !cg_stream_held(s->eng));
	if (in != CG_CTX_FAILED)
		engine_flush(s, why, cut ? ENGINE_CUT : ENGINE_FLUSH);
	if (in != CG_CTX_FAILED)
		cg_timing_read(s);
	cg_ctx_leave(in);
	cg_stream_sync_pending(s);
	pthread_mutex_unlock(&s->lock);
}

/* The marked stream whose deferred work began first after `after` (registry lock held). */
static struct cg_sstate *oldest_marked(uint64_t after)
{
	struct cg_sstate *best = NULL;
	uint64_t best_seq = 0;
	for (struct cg_sstate *s = streams; s; s = s->next) {
		uint64_t seq = atomic_load_explicit(&s->pending_seq, memory_order_relaxed);
		if (s->flush_mark && atomic_load_explicit(&s->pending, memory_order_acquire) &&
		    seq > after && (!best || seq < best_seq)) {
			best = s;
			best_seq = seq;
		}
	}
	return best;
}

/* Flush every live stream matching `pick`, one lock at a time, each with its context current,
 * in the order the program submitted their deferred work: oldest first, and every stream whose
 * deferred work is older than a chosen one's too (a kernel may wait for another stream's work
 * that the program submitted before it: reordered, it could hold the GPU forever). Then the
 * chosen streams with nothing deferred. A stream whose context this thread cannot make current
 * keeps its work pending (for a later flush, or the program's own thread): submitted elsewhere
 * it would be lost. */
static void flush_where(bool (*pick)(struct cg_sstate *, void *), void *arg,
                        enum cg_reason why, enum flush_how how)
{
	pthread_mutex_lock(&registry);
	uint64_t newest = 0;
	for (struct cg_sstate *s = streams; s; s = s->next) {
		s->flush_mark = s->eng && pick(s, arg);
		uint64_t seq = atomic_load_explicit(&s->pending_seq, memory_order_relaxed);
		if (s->flush_mark && atomic_load_explicit(&s->pending, memory_order_acquire) && seq > newest)
			newest = seq;
	}
	for (struct cg_sstate *s = streams; s; s = s->next)
		if (s->eng && atomic_load_explicit(&s->pending, memory_order_acquire) &&
		    atomic_load_explicit(&s->pending_seq, memory_order_relaxed) <= newest)
			s->flush_mark = true;
	uint64_t after = 0;
	for (struct cg_sstate *s; (s = oldest_marked(after));) {
		after = atomic_load_explicit(&s->pending_seq, memory_order_relaxed);
		s->flush_mark = false;
		flush_one(s, why, how);
	}
	for (struct cg_sstate *s = streams; s; s = s->next)
		if (s->flush_mark) {
			s->flush_mark = false;
			flush_one(s, why, how);
		}
	pthread_mutex_unlock(&registry);
}

static bool pick_pending(struct cg_sstate *s, void *arg)
{
	return atomic_load_explicit(&s->pending, memory_order_acquire);
}

static bool pick_pending_other(struct cg_sstate *s, void *self)
{
	return s != self && atomic_load_explicit(&s->pending, memory_order_acquire);
}

static bool pick_all(struct cg_sstate *s, void *arg)
{
	return true;
}

void cg_stream_order(struct cg_sstate *s)
{
	/* Work reaches the GPU in the order the program submitted it, across streams too: what
	 * another stream deferred goes first. The legacy stream's implicit synchronisation needs
	 * it; so does a kernel that waits for another stream's work through memory (a flag set by
	 * a producer: reordered, the waiting consumer can hold every SM). The point recurs with
	 * the program's loop, so it is also a learned chunk boundary there. One load while only
	 * this stream, or none, defers. */
	int n = atomic_load_explicit(&any_pending, memory_order_acquire);
	if (n > 1 || (n == 1 && !atomic_load_explicit(&s->pending, memory_order_acquire))) {
		/* Exit work submits every stream's work itself, holding the registry. */
		if (atomic_load_explicit(&cg_shim.exiting, memory_order_relaxed))
			return;
		flush_where(pick_pending_other, s, CG_R_STREAM_ORDER, ORDER);
	}
}

void cg_boundary_stream(CUstream h, bool ptsz, enum cg_reason why)
{
	cg_events_boundary(why);
	/* Every stream settled, no per-thread stream's work outstanding: nothing to flush, order
	 * or cut anywhere, so no stream to look up. Forwarded boundaries that find every stream
	 * quiet do not even come here (boundary.c); syncs and copies, which the controller times
	 * and which mark a launched chunk, do. */
	if (atomic_load_explicit(&unsettled, memory_order_acquire) == 0 &&
	    atomic_load_explicit(&cg_ptds_outstanding, memory_order_acquire) == 0) {
		if (cg_reason_waits(why) && cg_shim.engine)
			cg_engine_note_wait(cg_shim.engine);
		return;
	}
	struct cg_sstate *s = cg_stream_get(h, ptsz);
	if (!s)
		return;
	cg_stream_order(s);
	/* The pass-through path of event records, stream queries and the program's own graph
	 * launches: nothing happened on the stream since its last boundary, so there is nothing
	 * to flush or cut, and no lock to take. */
	if (atomic_load_explicit(&s->calm, memory_order_acquire) == CG_SETTLED &&
	    (!s->per_thread || atomic_load_explicit(&cg_ptds_outstanding, memory_order_acquire) == 0)) {
		if (cg_reason_waits(why) && cg_shim.engine)
			cg_engine_note_wait(cg_shim.engine);
		return;
	}
	pthread_mutex_lock(&s->lock);
	if (s->per_thread)
		cg_ptds_catch_up(s);
	if (s->eng) { /* checked under the lock: exit work may have retired the stream */
		engine_flush(s, why, ENGINE_CUT);
		cg_timing_read(s);
		cg_stream_sync_pending(s);
	}
	pthread_mutex_unlock(&s->lock);
}

/* This thread's per-thread streams wait for work other threads redirected from them (ptds.h)
 * before a call that may observe them goes on. */
static void catch_up_mine(void)
{
	if (atomic_load_explicit(&cg_ptds_outstanding, memory_order_acquire) == 0)
		return;
	pthread_mutex_lock(&registry);
	for (struct cg_sstate *s = streams; s; s = s->next) {
		if (!s->per_thread || !cg_stream_mine(s))
			continue;
		pthread_mutex_lock(&s->lock);
		cg_ptds_catch_up(s);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&registry);
}

void cg_boundary_all(enum cg_reason why)
{
	cg_events_boundary(why);
	flush_where(pick_all, NULL, why, CUT);
	catch_up_mine();
}

void cg_flush_all(enum cg_reason why)
{
	catch_up_mine();
	if (!cg_any_pending())
		return;
	/* A program call that forces a flush recurs where the program makes it: cut there too. */
	flush_where(pick_pending, NULL, why, CUT_DEFERRED);
}

/* The flusher's scan: streams whose work reached max age are flushed; for the others, when. */
struct age { uint64_t now, max, next; bool again; };

static bool pick_old(struct cg_sstate *s, void *arg)
{
	struct age *a = arg;
	if (!atomic_load_explicit(&s->pending, memory_order_acquire))
		return false;
	uint64_t since = cg_stream_pending_since(s->eng);
	uint64_t max = cg_stream_defer_budget_ns(s->eng);  /* the stream's, raised where it is slow */
	if (!max)
		max = a->max;
	if (!since || (a->now >= since && a->now - since >= max)) {
		a->again = true; /* its flush may fail (context), or its age is unknown */
		return since != 0;
	}
	if (since + max < a->next)
		a->next = since + max;
	return false;
}

uint64_t cg_flush_older_than(uint64_t now_ns, uint64_t max_age_ns, uint64_t retry_ns)
{
	if (!cg_any_pending())
		return 0;
	struct age a = { now_ns, max_age_ns, UINT64_MAX, false };
	flush_where(pick_old, &a, CG_R_TIMEOUT, FLUSH);
	if (!cg_any_pending())
		return 0;
	/* Work still deferred that was not seen young (deferred since the scan, or flushed in vain). */
	if ((a.again || a.next == UINT64_MAX) && now_ns + retry_ns < a.next)
		return now_ns + retry_ns;
	return a.next;
}

/* The flusher: cost-gate samples of streams the program no longer flushes or syncs. A busy
 * stream is left to its next round. */
void cg_stream_read_timing(void)
{
	if (!cg_timing_due())
		return;
	pthread_mutex_lock(&registry);
	for (struct cg_sstate *s = streams; s; s = s->next) {
		if (!s->eng || pthread_mutex_trylock(&s->lock) != 0)
			continue;
		if (s->eng && s->timing) {
			cg_timing_read(s);
			cg_stream_sync_pending(s);
		}
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&registry);
}

/* --- forgetting ---------------------------------------------------------------------------- */
static void retire(struct cg_sstate *s, enum cg_reason why)
{
	pthread_mutex_lock(&s->lock);
	if (s->eng) {
		engine_flush(s, why, ENGINE_FREE);
		s->eng = NULL;
	}
	cg_stream_sync_pending(s);
	cg_backend_forget_stream(s);
	s->live = false;
	pthread_mutex_unlock(&s->lock);
}

static void forget_where(bool (*pick)(struct cg_sstate *, const void *), const void *arg,
                         enum cg_reason why)
{
	pthread_mutex_lock(&registry);
	for (struct cg_sstate **pp = &streams; *pp;) {
		struct cg_sstate *s = *pp;
		if (!pick(s, arg)) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		retire(s, why);
		s->next = recycled;
		recycled = s;
	}
	atomic_fetch_add(&registry_gen, 1);
	pthread_mutex_unlock(&registry);
}

static bool pick_handle(struct cg_sstate *s, const void *h)
{
	return !s->legacy && !s->per_thread && s->handle == h;
}

static bool pick_ctx(struct cg_sstate *s, const void *ctx)
{
	return !ctx || s->ctx == ctx;
}

void cg_stream_forget(CUstream h)
{
	forget_where(pick_handle, h, CG_R_SYNC);
}

void cg_stream_forget_ctx(CUcontext ctx, enum cg_reason why)
{
	forget_where(pick_ctx, ctx, why);
}

static bool pick_idle_orphan(struct cg_sstate *s, const void *arg)
{
	return s->per_thread && s->owner == 0 && !atomic_load(&s->pending);
}

void cg_stream_reap(void)
{
	int n = atomic_load_explicit(&orphans, memory_order_acquire);
	if (n == 0)
		return;
	forget_where(pick_idle_orphan, NULL, CG_R_SYNC);
	/* Orphans still holding work stay counted (the timeout flush empties them). */
	int left = 0;
	pthread_mutex_lock(&registry);
	for (struct cg_sstate *s = streams; s; s = s->next)
		left += s->per_thread && s->owner == 0;
	atomic_store(&orphans, left);
	pthread_mutex_unlock(&registry);
}

/* Exit: like forgetting every stream, but a lock held by another thread (exit() called while a
 * launch is in progress elsewhere) is waited for only briefly: exit must not hang. */
static bool lock_briefly(pthread_mutex_t *m)
{
	struct timespec t = cg_deadline_ms(200);
	return pthread_mutex_timedlock(m, &t) == 0;
}

void cg_stream_exit_all(void)
{
	if (!lock_briefly(&registry))
		return;
	for (struct cg_sstate *s = streams; s; s = s->next) {
		if (!s->eng || !lock_briefly(&s->lock))
			continue;
		engine_flush(s, CG_R_EXIT, ENGINE_FREE);
		s->eng = NULL;
		cg_stream_sync_pending(s);
		cg_backend_forget_stream(s);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&registry);
}

void cg_stream_each(void (*fn)(struct cg_sstate *s, void *arg), void *arg)
{
	pthread_mutex_lock(&registry);
	for (struct cg_sstate *s = streams; s; s = s->next)
		fn(s, arg);
	pthread_mutex_unlock(&registry);
}
