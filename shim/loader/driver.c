/* Finding the real driver: the real dlsym, libcuda's entry points, and the table mapping a real
 * driver pointer to what the program is handed (raw / wrapper / default-deny trampoline). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>

#include "driver.h"
#include "shim/base/log.h"
#include "real_dlsym.h"
#include "shim/base/shim.h"
#include "trampoline.h"

const char *const cg_entry_name[CG_E_COUNT] = {
#define CG_PURE(n) [CG_E_##n] = #n,
#define CG_BOUNDARY(n, ...) [CG_E_##n] = #n,
#define CG_HOOK(n, ...) [CG_E_##n] = #n,
#include "cuda.def"
#undef CG_PURE
#undef CG_BOUNDARY
#undef CG_HOOK
};

static const bool entry_is_pure[CG_E_COUNT] = {
#define CG_PURE(n) [CG_E_##n] = true,
#define CG_BOUNDARY(n, ...)
#define CG_HOOK(n, ...)
#include "cuda.def"
#undef CG_PURE
#undef CG_BOUNDARY
#undef CG_HOOK
};

void *cg_real[CG_E_COUNT];

/* --- real pointer -> handed-out pointer ---------------------------------------------------- */
/* Open addressing, insert-only, lock-free reads: a slot's value is written before its key is
 * published with release order. Sized for the list plus every other driver symbol. */
#define MAP_SLOTS 4096
static struct { _Atomic(void *) key; void *val; } map[MAP_SLOTS];
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t map_hash(const void *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	return (size_t)(x >> 40) & (MAP_SLOTS - 1);
}

static void *map_get(const void *key)
{
	for (size_t i = map_hash(key), n = 0; n < MAP_SLOTS; i = (i + 1) & (MAP_SLOTS - 1), n++) {
		void *k = atomic_load_explicit(&map[i].key, memory_order_acquire);
		if (k == key)
			return map[i].val;
		if (!k)
			return NULL;
	}
	return NULL;
}

/* Returns the value now stored for key (an earlier insert wins). Caller holds map_lock. */
static void *map_put_locked(void *key, void *val)
{
	for (size_t i = map_hash(key), n = 0; n < MAP_SLOTS; i = (i + 1) & (MAP_SLOTS - 1), n++) {
		void *k = atomic_load_explicit(&map[i].key, memory_order_relaxed);
		if (k == key)
			return map[i].val;
		if (!k) {
			map[i].val = val;
			atomic_store_explicit(&map[i].key, key, memory_order_release);
			return val;
		}
	}
	return NULL;
}

/* --- loading and start-up ----------------------------------------------------------------- */
static void *libcuda;
static const void *libcuda_base;
/* 0 not started, 1 starting (driver load, then the start-up hooks), 2 ready, 3 no driver. Ready is
 * published (release) only once the shim is built: a thread that sees it (acquire) sees the
 * engine, options, report and flusher; threads arriving meanwhile wait on start_cond. */
atomic_int cg_driver_state; /* driver.h */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cond = PTHREAD_COND_INITIALIZER;
static bool load_only; /* a fork() child of a process that was starting: pass-through, no shim */

/* The CG_DRIVER_ON_LOAD pointers (driver.h): the linker defines both ends of the section; weak,
 * as a program that registers none has no such section. */
extern void (*const __start_cg_on_load[])(void) __attribute__((weak, visibility("hidden")));
extern void (*const __stop_cg_on_load[])(void) __attribute__((weak, visibility("hidden")));

static void driver_load(void)
{
	libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!libcuda) {
		cg_log(CG_LOG_WARN, "libcuda.so.1 cannot be loaded (%s): cugraft stays out of the way", dlerror());
		return;
	}
	for (int e = 0; e < CG_E_COUNT; e++)
		cg_real[e] = cg_real_dlsym(libcuda, cg_entry_name[e]);
	Dl_info info;
	void *any = cg_real[CG_E_cuInit] ? cg_real[CG_E_cuInit] : cg_real[CG_E_cuGetProcAddress_v2];
	if (any && dladdr(any, &info))
		libcuda_base = info.dli_fbase;

	pthread_mutex_lock(&map_lock);
	for (int e = 0; e < CG_E_COUNT; e++)
		if (cg_real[e])
			map_put_locked(cg_real[e], entry_is_pure[e] ? cg_real[e] : cg_wrapper[e]);
	pthread_mutex_unlock(&map_lock);
	cg_deny_bind_exports(libcuda);
}

void cg_driver_init_slow(void)
{
	if (atomic_load_explicit(&cg_driver_state, memory_order_acquire) >= 2 || cg_tls.in_init)
		return;
	int expected = 0;
	if (atomic_compare_exchange_strong(&cg_driver_state, &expected, 1)) {
		cg_tls.in_init = true;
		driver_load();
		if (libcuda && !load_only)
			for (void (*const *hook)(void) = __start_cg_on_load; hook < __stop_cg_on_load; hook++)
				(*hook)();
		cg_tls.in_init = false;
		pthread_mutex_lock(&start_lock);
		atomic_store_explicit(&cg_driver_state, libcuda ? 2 : 3, memory_order_release);
		pthread_cond_broadcast(&start_cond);
		pthread_mutex_unlock(&start_lock);
		/* Ready (released with the entry table and whatever start-up built). A fork() child
		 * that only loads the driver is disabled: it stays unsettled. */
		if (libcuda && !load_only)
			atomic_fetch_and(&cg_unsettled, ~(unsigned)CG_UNSETTLED_STARTING);
		return;
	}
	/* Not a spin: start-up may take a while (CUPTI for the audit, a slow file system). */
	pthread_mutex_lock(&start_lock);
	while (atomic_load_explicit(&cg_driver_state, memory_order_acquire) == 1)
		pthread_cond_wait(&start_cond, &start_lock);
	pthread_mutex_unlock(&start_lock);
}

bool cg_driver_after_fork(void)
{
	/* Only the forking thread lives on: locks other threads held are free again, and a start-up
	 * in progress (its thread is gone) is started over as a plain driver load. */
	start_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	start_cond = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
	map_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	int state = atomic_load(&cg_driver_state);
	if (state == 1) {
		load_only = true;
		atomic_store(&cg_driver_state, 0);
	}
	return state != 0;
}

void *cg_driver_sym(const char *name)
{
	return cg_driver_ready() && libcuda ? cg_real_dlsym(libcuda, name) : NULL;
}

bool cg_driver_in_init(void)
{
	return cg_tls.in_init;
}

const char *cg_driver_error_name(CUresult r)
{
	const char *name = NULL;
	if (!cg_real[CG_E_cuGetErrorName] || CG_REAL(cuGetErrorName)(r, &name) != CUDA_SUCCESS)
		name = "CUDA_ERROR_UNKNOWN";
	return name;
}

bool cg_in_libcuda(const void *addr)
{
	Dl_info info;
	return libcuda_base && dladdr(addr, &info) && info.dli_fbase == libcuda_base;
}

void *cg_handout(void *real, const char *name)
{
	if (!real)
		return real;
	if (cg_shim_disabled())
		return real;
	void *h = map_get(real);
	if (h)
		return h;
	if (!cg_in_libcuda(real))
		return real;
	/* Default deny: a driver entry point nobody classified flushes everything first. */
	pthread_mutex_lock(&map_lock);
	h = map_get(real);
	if (!h) {
		h = cg_deny_trampoline(real, name);
		h = h ? map_put_locked(real, h) : NULL;
	}
	pthread_mutex_unlock(&map_lock);
	return h ? h : real;
}
