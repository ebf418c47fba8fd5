/* Default deny (deny.h): binding trampolines to real targets, and what a trampoline does before
 * the jump — flush every stream's pending work, count the call, note the first one. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "deny.h"
#include "deny_table.h"
#include "driver.h"
#include "log.h"
#include "shim.h"
#include "stream.h"

#define SLOT_BYTES 16
#define MAX_SLOTS 4096

static _Atomic(void *) target[MAX_SLOTS];
static const char *slot_name[MAX_SLOTS];
static _Atomic uint64_t slot_calls[MAX_SLOTS];
static unsigned pool_used;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

/* Returned for an exported name the installed driver does not have: every driver entry point
 * returns CUresult, so this is a valid stand-in whatever the prototype. */
static CUresult deny_missing(void)
{
	return CUDA_ERROR_NOT_FOUND;
}

void cg_deny_bind_exports(void *libcuda)
{
	for (unsigned i = 0; i < cg_deny_nexports && i < MAX_SLOTS; i++) {
		slot_name[i] = cg_deny_export_names[i];
		atomic_store(&target[i], cg_real_dlsym(libcuda, cg_deny_export_names[i]));
	}
}

void *cg_deny_trampoline(void *real, const char *name)
{
	/* An exported trampoline already forwards to this address: hand that one out. */
	for (unsigned i = 0; i < cg_deny_nexports && i < MAX_SLOTS; i++)
		if (atomic_load(&target[i]) == real)
			return (void *)(cg_deny_exports + (size_t)i * SLOT_BYTES);
	pthread_mutex_lock(&pool_lock);
	void *t = NULL;
	if (pool_used < cg_deny_npool && cg_deny_nexports + pool_used < MAX_SLOTS) {
		unsigned slot = cg_deny_nexports + pool_used;
		/* Our copy: the caller's string (a Python ctypes name) may not outlive the lookup. */
		slot_name[slot] = name ? strndup(name, 128) : NULL;
		if (!slot_name[slot])
			slot_name[slot] = "(unnamed driver entry point)";
		atomic_store(&target[slot], real);
		t = (void *)(cg_deny_pool + (size_t)pool_used * SLOT_BYTES);
		pool_used++;
	}
	pthread_mutex_unlock(&pool_lock);
	if (!t)
		cg_log(CG_LOG_WARN, "default-deny trampolines exhausted: %s handed out raw", name ? name : "?");
	return t;
}

bool cg_deny_is_trampoline(const void *p)
{
	return (const char *)p >= cg_deny_exports && (const char *)p < cg_deny_pool_end;
}

bool cg_deny_stat(unsigned i, const char **name, uint64_t *calls)
{
	if (i >= cg_deny_nexports + pool_used || i >= MAX_SLOTS)
		return false;
	*name = slot_name[i];
	*calls = atomic_load_explicit(&slot_calls[i], memory_order_relaxed);
	return true;
}

void *cg_deny_enter(uint32_t slot)
{
	if (slot >= MAX_SLOTS)
		return (void *)deny_missing;
	cg_driver_init();
	void *t = atomic_load_explicit(&target[slot], memory_order_acquire);
	if (!cg_shim_passthrough()) {
		if (atomic_fetch_add_explicit(&slot_calls[slot], 1, memory_order_relaxed) == 0)
			cg_log(CG_LOG_DEBUG, "unclassified driver entry point %s: flushing before it", slot_name[slot]);
		cg_tl_api = slot_name[slot];
		cg_flush_all(CG_R_UNKNOWN_API);
	}
	cg_tl_deny_armed = 1;
	return t ? t : (void *)deny_missing;
}
