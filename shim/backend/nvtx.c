/* NVTX ranges and marks of cugraft's own work (nvtx.h), with the header-only NVTX v3 of the CUDA
 * toolkit: no link dependency; the first NVTX call loads the tool's injection library named by
 * NVTX_INJECTION64_PATH (nsys sets it), and without one every call returns at once. */
#define _GNU_SOURCE
#include "nvtx.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include <nvtx3/nvToolsExt.h>

#include "shim/base/log.h"
#include "shim/base/options.h"
#include "shim/base/shim.h"
#include "policy/control.h"
#include "policy/engine.h"

int cg_nvtx_state = -1;

static nvtxDomainHandle_t domain;
static pthread_once_t domain_once = PTHREAD_ONCE_INIT;

static void domain_create(void)
{
	/* A tool's injection library may call the driver while it starts: not the program's. */
	cg_tls.internal++;
	domain = nvtxDomainCreateA("cugraft");
	cg_tls.internal--;
}

void cg_nvtx_start(void)
{
	int on = 0;
	if (cg_opt_bool(CG_OPT_NVTX)) {
		/* NVTX's first call loads the tool's injection library; without one every NVTX call
		 * does nothing and the domain is NULL: then neither does cugraft mark anything. */
		pthread_once(&domain_once, domain_create);
		on = domain != NULL;
		if (!on)
			cg_log(CG_LOG_INFO, "CUGRAFT_NVTX: no NVTX tool attached (nsys, or NVTX_INJECTION64_PATH): nothing to mark");
	}
	__atomic_store_n(&cg_nvtx_state, on, __ATOMIC_RELAXED);
}

bool cg_nvtx_resolve(void)
{
	cg_nvtx_start();
	return __atomic_load_n(&cg_nvtx_state, __ATOMIC_RELAXED) > 0;
}

enum { COLOR_REPLAY = 0xff76b900, COLOR_FLUSH = 0xffe07020, COLOR_LEARN = 0xff3070d0,
       COLOR_MARK = 0xff909090 };

static void attrs(nvtxEventAttributes_t *a, uint32_t color, const char *name)
{
	*a = (nvtxEventAttributes_t){ 0 };
	a->version = NVTX_VERSION;
	a->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a->colorType = NVTX_COLOR_ARGB;
	a->color = color;
	a->messageType = NVTX_MESSAGE_TYPE_ASCII;
	a->message.ascii = name;
}

__attribute__((format(printf, 3, 4)))
static void emit(bool push, uint32_t color, const char *fmt, ...)
{
	pthread_once(&domain_once, domain_create);
	char name[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	nvtxEventAttributes_t a;
	attrs(&a, color, name);
	cg_tls.internal++;
	if (push)
		nvtxDomainRangePushEx(domain, &a);
	else
		nvtxDomainMarkEx(domain, &a);
	cg_tls.internal--;
}

static void pop(void)
{
	cg_tls.internal++;
	nvtxDomainRangePop(domain);
	cg_tls.internal--;
}

/* ---- ops run eagerly, by reason ---------------------------------------------------------- */

/* The engine's fallback counters as marked so far (under tally_lock). */
static uint64_t tallied[CG_R_COUNT];
static pthread_mutex_t tally_lock = PTHREAD_MUTEX_INITIALIZER;

static void tally(void)
{
	if (!cg_shim.engine)
		return;
	struct cg_stats st;
	cg_engine_stats(cg_shim.engine, &st);
	pthread_mutex_lock(&tally_lock);
	for (int r = 1; r < CG_R_COUNT; r++) {
		if (st.fallbacks[r] <= tallied[r])
			continue;
		emit(false, COLOR_FLUSH, "eager %s ops=%llu", cg_reason_name((enum cg_reason)r),
		     (unsigned long long)(st.fallbacks[r] - tallied[r]));
		tallied[r] = st.fallbacks[r];
	}
	pthread_mutex_unlock(&tally_lock);
}

/* This thread's engine call (cg_tls.nvtx): whether it pushed a flush range, and the ops the
 * backend submitted eagerly in it; the content of the graph being built (GRAPH_BUILT names it). */
void cg_nvtx_flush_begin(enum cg_reason why, bool range)
{
	cg_tls.nvtx.range = range;
	cg_tls.nvtx.eager = 0;
	if (range)
		emit(true, COLOR_FLUSH, "flush %s", cg_reason_name(why));
}

void cg_nvtx_flush_end(void)
{
	tally();
	if (cg_tls.nvtx.range)
		pop();
	cg_tls.nvtx.range = false;
}

void cg_nvtx_submit_begin(void)
{
	cg_tls.nvtx.eager = 0;
}

void cg_nvtx_submit_end(bool passed)
{
	/* (the counters move only where an op passed or ran eagerly: a replayed op costs nothing) */
	if (passed || cg_tls.nvtx.eager)
		tally();
}

void cg_nvtx_bypass(enum cg_reason why)
{
	emit(false, COLOR_FLUSH, "eager %s ops=1", cg_reason_name(why));
}

void cg_nvtx_eager(uint32_t n)
{
	cg_tls.nvtx.eager += n;
}

/* ---- chunk keys by graph content --------------------------------------------------------- */

/* A fixed table, written at graph builds only (under `keys_lock`), read lock-free at launches:
 * a slot's key is stored before its content, so a reader that finds the content finds its key.
 * Past its size, replays of further chunks are named "chunk=?". */
#define KEYS 4096
#define PROBES 16
static struct { uint64_t content, key; } keys[KEYS];
static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;

static void key_note(uint64_t content, uint64_t key)
{
	pthread_mutex_lock(&keys_lock);
	for (uint32_t i = 0; i < PROBES; i++) {
		uint32_t at = (uint32_t)(content + i) & (KEYS - 1);
		uint64_t c = __atomic_load_n(&keys[at].content, __ATOMIC_RELAXED);
		if (c == content)
			break;
		if (c == 0) {
			__atomic_store_n(&keys[at].key, key, __ATOMIC_RELAXED);
			__atomic_store_n(&keys[at].content, content, __ATOMIC_RELEASE);
			break;
		}
	}
	pthread_mutex_unlock(&keys_lock);
}

static uint64_t key_of(uint64_t content)
{
	for (uint32_t i = 0; i < PROBES; i++) {
		uint32_t at = (uint32_t)(content + i) & (KEYS - 1);
		uint64_t c = __atomic_load_n(&keys[at].content, __ATOMIC_ACQUIRE);
		if (c == content)
			return __atomic_load_n(&keys[at].key, __ATOMIC_RELAXED);
		if (c == 0)
			return 0;
	}
	return 0;
}

uint64_t cg_nvtx_build_begin(const struct cg_op *ops, uint32_t n)
{
	uint64_t c = 0x9e3779b97f4a7c15ull ^ n;
	for (uint32_t i = 0; i < n; i++)
		c = (c ^ ops[i].hash) * 0xff51afd7ed558ccdull + i;
	c |= 1;   /* never 0: 0 marks a free slot */
	cg_tls.nvtx.built = c;
	emit(true, COLOR_LEARN, "learn build ops=%u", n);
	return c;
}

void cg_nvtx_build_end(void)
{
	pop();
}

void cg_nvtx_replay_begin(uint64_t content, uint32_t ops, uint32_t patches)
{
	uint64_t key = key_of(content);
	if (key)
		emit(true, COLOR_REPLAY, "replay chunk=0x%llx ops=%u patches=%u", (unsigned long long)key,
		     ops, patches);
	else
		emit(true, COLOR_REPLAY, "replay chunk=? ops=%u patches=%u", ops, patches);
}

void cg_nvtx_replay_end(void)
{
	pop();
}

void cg_nvtx_event(const struct cg_event *ev)
{
	unsigned long long key = (unsigned long long)ev->chunk_key;
	switch (ev->kind) {
	case CG_EV_CHUNK_ARMED:
		emit(false, COLOR_LEARN, "learn chunk=0x%llx ops=%u", key, ev->chunk_ops);
		break;
	case CG_EV_GRAPH_BUILT:
		/* right after the build of its first graph, on this thread */
		if (cg_tls.nvtx.built)
			key_note(cg_tls.nvtx.built, ev->chunk_key);
		cg_tls.nvtx.built = 0;
		emit(false, COLOR_LEARN, "graph built chunk=0x%llx ops=%u", key, ev->chunk_ops);
		break;
	case CG_EV_BUILD_FAILED:
		cg_tls.nvtx.built = 0;
		emit(false, COLOR_MARK, "graph failed chunk=0x%llx ops=%u %s", key, ev->chunk_ops,
		     ev->detail ? ev->detail : "");
		break;
	case CG_EV_CHUNK_DISABLED:
		emit(false, COLOR_MARK, "chunk disabled chunk=0x%llx %s", key, cg_reason_name(ev->reason));
		break;
	case CG_EV_EVICTED:
		emit(false, COLOR_MARK, "evicted chunk=0x%llx", key);
		break;
	case CG_EV_FALLBACK:   /* the report's first few of each reason; counts are "eager" marks */
		emit(false, COLOR_MARK, "fallback %s", cg_reason_name(ev->reason));
		break;
	case CG_EV_DECISION: {
		const struct cg_control_decision *d = ev->decision;
		emit(false, COLOR_MARK, "decision %s%s eager_ns_per_op=%.0f graphed_ns_per_op=%.0f",
		     d->defer ? "graphs" : "eager", d->flipped ? " changed" : "", d->eager_ns, d->graph_ns);
		break;
	}
	}
}
