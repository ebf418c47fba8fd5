/* A CPU fake of CUPTI's activity API (build/tests/fakecupti/libcupti.so.13), for profile mode's
 * tests: the CPU fake driver's simulated device timeline (fakecuda_activity, tests/fakecuda)
 * comes back as kernel records, in the client's buffers and on the client's clock. Subscribing
 * to callbacks (the audit) fails, as with another client attached. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

/* Records are delivered in batches of this many, and at a flush. */
enum { BATCH = 4096 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static CUpti_TimestampCallbackFunc client_clock;
static struct interval { uint64_t start, end; } *pending;
static size_t npending, cap;
static bool enabled;

static uint64_t monotonic(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t now(void)
{
	return client_clock ? client_clock() : monotonic();
}

/* Hands the intervals to the client, buffer by buffer (outside the lock: the client's
 * callback takes its own). */
static void deliver(struct interval *v, size_t n)
{
	for (size_t k = 0; k < n;) {
		uint8_t *buf = NULL;
		size_t size = 0, max_records = 0;
		requested(&buf, &size, &max_records);
		if (!buf || size < sizeof(CUpti_ActivityKernel10))
			return;
		size_t valid = 0;
		for (; k < n && valid + sizeof(CUpti_ActivityKernel10) <= size; k++) {
			CUpti_ActivityKernel10 *r = (void *)(buf + valid);
			memset(r, 0, sizeof(*r));
			r->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
			r->start = v[k].start;
			r->end = v[k].end;
			r->deviceId = 0;
			valid += sizeof(*r);
		}
		completed(NULL, 0, buf, size, valid);
	}
}

/* Takes what is pending (the caller frees it); *n how much. */
static struct interval *take(size_t *n)
{
	struct interval *v = pending;
	*n = npending;
	pending = NULL;
	npending = cap = 0;
	return v;
}

static void record(uint64_t start, uint64_t end)
{
	pthread_mutex_lock(&lock);
	if (npending == cap) {
		size_t more = cap ? 2 * cap : BATCH;
		struct interval *v = realloc(pending, more * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&lock);
			return;
		}
		pending = v;
		cap = more;
	}
	pending[npending++] = (struct interval){ start, end };
	size_t n = 0;
	struct interval *v = npending >= BATCH ? take(&n) : NULL;
	pthread_mutex_unlock(&lock);
	if (v)
		deliver(v, n);
	free(v);
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
                                                    CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
	if (!funcBufferRequested || !funcBufferCompleted)
		return CUPTI_ERROR_INVALID_PARAMETER;
	requested = funcBufferRequested;
	completed = funcBufferCompleted;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp)
{
	if (enabled)
		return CUPTI_ERROR_INVALID_OPERATION;  /* before any kind is enabled, as CUPTI asks */
	client_clock = funcTimestamp;
	return CUPTI_SUCCESS;
}

/* FAKECUPTI_LAUNCH_NS: what recording kernels adds to each launch call (1.6 us on an H100). */
static void tracing(void *driver, bool on)
{
	void (*hook)(bool, long long) = (__typeof__(hook))dlsym(driver, "fakecuda_tracing");
	const char *v = getenv("FAKECUPTI_LAUNCH_NS");
	if (hook)
		hook(on, v && *v ? atoll(v) : 0);
}

/* Kernels turn the fake driver's device timeline on, the first time, and its records; the
 * other kinds are accepted (its copies and memsets come as kernel records). */
CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
	if (!requested)
		return CUPTI_ERROR_INVALID_OPERATION;
	if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && kind != CUPTI_ACTIVITY_KIND_KERNEL)
		return CUPTI_SUCCESS;
	void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void (*hook)(uint64_t (*)(void), void (*)(uint64_t, uint64_t)) =
		driver ? (__typeof__(hook))dlsym(driver, "fakecuda_activity") : NULL;
	if (!hook)
		return CUPTI_ERROR_NOT_INITIALIZED;  /* no fake driver: nothing to report */
	if (!enabled)
		hook(now, record);
	enabled = true;
	tracing(driver, true);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind)
{
	if (kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && kind != CUPTI_ACTIVITY_KIND_KERNEL)
		return CUPTI_SUCCESS;
	void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!enabled || !driver)
		return CUPTI_ERROR_INVALID_OPERATION;
	tracing(driver, false);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
	(void)flag;
	pthread_mutex_lock(&lock);
	size_t n = 0;
	struct interval *v = take(&n);
	pthread_mutex_unlock(&lock);
	if (requested && n)
		deliver(v, n);
	free(v);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
                                                CUpti_Activity **record)
{
	uint8_t *next = *record ? (uint8_t *)*record + sizeof(CUpti_ActivityKernel10) : buffer;
	if (next + sizeof(CUpti_ActivityKernel10) > buffer + validBufferSizeBytes)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*record = (CUpti_Activity *)next;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
                                                       size_t *dropped)
{
	(void)context;
	(void)streamId;
	*dropped = 0;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
	*timestamp = now();
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                    void *userdata)
{
	(void)subscriber;
	(void)callback;
	(void)userdata;
	return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain)
{
	(void)enable;
	(void)subscriber;
	(void)domain;
	return CUPTI_ERROR_INVALID_PARAMETER;
}
