/* GPU busy time from CUPTI activity records (activity.h). Records arrive in buffers on CUPTI's
 * thread (or ours, when flushing at exit); their intervals go into a ring of the last 1M, and
 * the union per device is computed once, at exit, for the window the profile asks for. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include <cupti.h>

#include "activity.h"
#include "audit.h"
#include "busy.h"
#include "shim/base/shim.h"

/* 1M intervals (16 MiB): ~1,600 iterations of a 630-launch step. A longer run keeps its end,
 * which is where the profile's window lies. */
enum { RING = 1 << 20, BUFFER_BYTES = 4 << 20 };

struct interval {
	uint64_t start;
	uint32_t ns;    /* duration; longer than 4.29 s counts as 4.29 s */
	uint32_t dev;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct interval *ring;
static uint64_t kept, evicted_end, records, dropped;   /* under lock */
static atomic_bool running;

static struct {
	__typeof__(&cuptiActivityRegisterCallbacks) register_callbacks;
	__typeof__(&cuptiActivityRegisterTimestampCallback) register_timestamp;
	__typeof__(&cuptiActivityEnable) enable;
	__typeof__(&cuptiActivityDisable) disable;
	__typeof__(&cuptiActivityFlushAll) flush_all;
	__typeof__(&cuptiActivityGetNextRecord) next_record;
	__typeof__(&cuptiActivityGetNumDroppedRecords) num_dropped;
	__typeof__(&cuptiGetTimestamp) timestamp;
} api;

static uint64_t cupti_now(void)
{
	uint64_t t = 0;
	api.timestamp(&t);
	return t;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = malloc(BUFFER_BYTES);  /* 16-byte aligned: CUPTI asks for 8 */
	*size = *buffer ? BUFFER_BYTES : 0;
	*max_records = 0;
}

static void keep(uint64_t start, uint64_t end, uint32_t dev)
{
	records++;
	if (start == 0 || end <= start)  /* incomplete: the work did not finish before the flush */
		return;
	struct interval *slot = &ring[kept++ % RING];
	if (kept > RING && slot->start + slot->ns > evicted_end)
		evicted_end = slot->start + slot->ns;
	uint64_t ns = end - start;
	*slot = (struct interval){ start, ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns, dev };
}

/* The record layouts of the CUPTI headers we build with (13.x): start, end and deviceId. */
static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
                                      size_t size, size_t valid)
{
	(void)size;
	CUpti_Activity *rec = NULL;
	pthread_mutex_lock(&lock);
	while (buffer && valid && api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
		switch (rec->kind) {
		case CUPTI_ACTIVITY_KIND_KERNEL:
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
			const CUpti_ActivityKernel10 *k = (const void *)rec;
			keep(k->start, k->end, k->deviceId);
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMCPY: {
			const CUpti_ActivityMemcpy6 *m = (const void *)rec;
			keep(m->start, m->end, m->deviceId);
			break;
		}
		case CUPTI_ACTIVITY_KIND_MEMSET: {
			const CUpti_ActivityMemset4 *m = (const void *)rec;
			keep(m->start, m->end, m->deviceId);
			break;
		}
		default:
			break;
		}
	}
	size_t lost = 0;
	if (api.num_dropped(ctx, stream, &lost) == CUPTI_SUCCESS)
		dropped += lost;
	pthread_mutex_unlock(&lock);
	free(buffer);
}

bool cg_activity_start(cg_clock_fn ours, cg_clock_fn *clock, const char **why)
{
	void *h = cg_cupti_open();
	if (!h) {
		*why = "libcupti cannot be loaded";
		return false;
	}
#define SYM(field, name) *(void **)&api.field = dlsym(h, name)
	SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
	SYM(register_timestamp, "cuptiActivityRegisterTimestampCallback");
	SYM(enable, "cuptiActivityEnable");
	SYM(disable, "cuptiActivityDisable");
	SYM(flush_all, "cuptiActivityFlushAll");
	SYM(next_record, "cuptiActivityGetNextRecord");
	SYM(num_dropped, "cuptiActivityGetNumDroppedRecords");
	SYM(timestamp, "cuptiGetTimestamp");
#undef SYM
	if (!api.register_callbacks || !api.enable || !api.flush_all || !api.next_record ||
	    !api.num_dropped || !api.timestamp) {
		*why = "libcupti lacks the activity API";
		return false;
	}
	ring = malloc(RING * sizeof(*ring));
	if (!ring) {
		*why = "no memory for the activity records";
		return false;
	}
	cg_tls.internal++;  /* CUPTI's own driver calls are not the program's */
	/* Records in our clock, so that they compare with the boundary times; before any kind is
	 * enabled, as CUPTI requires. */
	*clock = ours;
	if (!api.register_timestamp || api.register_timestamp(ours) != CUPTI_SUCCESS)
		*clock = cupti_now;
	CUptiResult r = api.register_callbacks(buffer_requested, buffer_completed);
	const CUpti_ActivityKind kinds[] = { CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	                                     CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET };
	for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		r = api.enable(kinds[i]);
	cg_tls.internal--;
	if (r != CUPTI_SUCCESS) {
		*why = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ?
		       "another CUPTI client (profiler, sanitizer) is attached" :
		       "CUPTI refused activity tracing";
		return false;
	}
	running = true;
	return true;
}

/* Kernel records only: their cost to a launch call is what floor.c times with them paused. */
bool cg_activity_pause(void)
{
	if (!running || !api.disable)
		return false;
	cg_tls.internal++;
	CUptiResult r = api.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	cg_tls.internal--;
	return r == CUPTI_SUCCESS;
}

bool cg_activity_resume(void)
{
	cg_tls.internal++;
	CUptiResult r = api.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	cg_tls.internal--;
	if (r != CUPTI_SUCCESS)
		running = false;  /* (the profile's GPU figures then say so) */
	return r == CUPTI_SUCCESS;
}

bool cg_activity_running(void)
{
	return running;
}

void cg_activity_flush(void)
{
	if (!running)
		return;
	cg_tls.internal++;
	api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	cg_tls.internal--;
}

void cg_activity_stats(struct cg_activity_stats *st)
{
	pthread_mutex_lock(&lock);
	st->records = records;
	st->dropped = dropped;
	st->complete_from = evicted_end;
	pthread_mutex_unlock(&lock);
}

/* The kept intervals as spans, copied under the lock; *n how many (NULL: none, or no memory). */
static struct cg_span *spans(size_t *n)
{
	pthread_mutex_lock(&lock);
	*n = kept < RING ? (size_t)kept : RING;
	struct cg_span *s = ring ? malloc((*n ? *n : 1) * sizeof(*s)) : NULL;
	for (size_t i = 0; s && i < *n; i++)
		s[i] = (struct cg_span){ ring[i].dev, ring[i].start, ring[i].start + ring[i].ns };
	pthread_mutex_unlock(&lock);
	return s;
}

uint64_t cg_activity_busy(uint64_t t0, uint64_t t1, int *dev)
{
	*dev = -1;
	size_t n;
	struct cg_span *s = spans(&n);
	if (!s)
		return 0;
	uint64_t busy = cg_busy_union(s, n, t0, t1, dev);
	free(s);
	return busy;
}

uint64_t cg_activity_idle_in(struct cg_span *host, size_t nh, uint64_t t0, uint64_t t1, int dev)
{
	size_t n;
	struct cg_span *s = spans(&n);
	uint64_t idle = cg_busy_idle_in(s, s ? n : 0, host, nh, dev, t0, t1);
	free(s);
	return idle;
}
