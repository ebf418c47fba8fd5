/* Default deny's trampolines (trampoline.h): binding them to real targets, handing one out for
 * an unclassified driver entry point, and their counts. What a trampoline does before the jump
 * is deny.c's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <cuda.h>

#include "deny_table.h"
#include "shim/base/log.h"
#include "real_dlsym.h"
#include "trampoline.h"

#define SLOT_BYTES 16
#define MAX_SLOTS CG_TRAMPOLINE_SLOTS

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

void *cg_trampoline_target(uint32_t slot)
{
	void *t = slot < MAX_SLOTS ? atomic_load_explicit(&target[slot], memory_order_acquire) : NULL;
	return t ? t : (void *)deny_missing;
}

const char *cg_trampoline_name(uint32_t slot)
{
	return slot < MAX_SLOTS ? slot_name[slot] : NULL;
}

uint64_t cg_trampoline_count(uint32_t slot)
{
	return slot < MAX_SLOTS ? atomic_fetch_add_explicit(&slot_calls[slot], 1, memory_order_relaxed) : 0;
}
