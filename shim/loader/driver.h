/* The driver as the shim sees it: every entry point of cuda.def as an id, the real libcuda
 * pointers behind them, and the table that maps a real pointer to what a caller is handed
 * (the raw pointer, a wrapper, or a default-deny trampoline). */
#ifndef CG_SHIM_DRIVER_H
#define CG_SHIM_DRIVER_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shim/base/shim.h"

/* cuda.h renames these to their newest ABI; the list names the exported symbols as they are. */
#undef cuGetProcAddress
#undef cuEventElapsedTime
#undef cuDeviceGetUuid
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuCtxDestroy
#undef cuStreamDestroy
/* Every entry point the shim wraps, declared from the list: the _ptsz forms and the first ABI of
 * entry points hooked in both versions (older runtimes ask for them) have no cuda.h declaration
 * of their own, and the others must agree with theirs. */
#define CG_PURE(n)
#define CG_BOUNDARY(n, proto, params, ...) CUresult n params;
#define CG_HOOK(n, proto, params, ...) CUresult n params;
#include "cuda.def"
#undef CG_PURE
#undef CG_BOUNDARY
#undef CG_HOOK

#define CG_EXPORT __attribute__((visibility("default")))

enum cg_entry {
#define CG_PURE(n) CG_E_##n,
#define CG_BOUNDARY(n, ...) CG_E_##n,
#define CG_HOOK(n, ...) CG_E_##n,
#include "cuda.def"
#undef CG_PURE
#undef CG_BOUNDARY
#undef CG_HOOK
	CG_E_COUNT
};

extern const char *const cg_entry_name[CG_E_COUNT];
/* Addresses of our exported wrappers, by entry id (NULL for pure entries): boundary.c, expanded
 * from the list like everything here. */
extern void *const cg_wrapper[CG_E_COUNT];
/* Real libcuda pointers, filled once by cg_driver_init(); NULL where the driver lacks one. */
extern void *cg_real[CG_E_COUNT];

/* The real pointer of a list entry, typed after its cuda.h prototype. */
#define CG_REAL(name) ((__typeof__(&name))cg_real[CG_E_##name])
/* A wrapper's real call for the program, marked while it runs (cg_tls.forwarding: the audit
 * knows the submission came through a wrapper). */
#define CG_FORWARDED(call)                                                                      \
	({ cg_tls.forwarding++; CUresult fwd_r_ = (call); cg_tls.forwarding--; fwd_r_; })

/* What runs once the driver is loaded, on the thread that loaded it, before the shim counts as
 * ready: start-up (init.c). A file above the loader registers it with CG_DRIVER_ON_LOAD(fn); the
 * linker gathers the pointers in one section, so the loader names nothing above it, and the
 * registration needs no constructor to have run (another library's constructor may reach the
 * driver before ours). A program linked without any (a unit test) only loads the driver. */
#define CG_DRIVER_ON_LOAD(fn)                                                                   \
	__attribute__((used, retain, section("cg_on_load"))) static void (*const cg_on_load_##fn)(void) = fn

/* Loads (or finds) libcuda, fills cg_real and runs the CG_DRIVER_ON_LOAD hooks once. Safe to call
 * from any hook, any thread, often: while one thread starts, the others wait until the shim is
 * ready (that thread's own calls meanwhile return at once and pass through). */
static inline void cg_driver_init(void);
/* True on the thread that is starting the shim (driver load, then the start-up hooks). */
bool cg_driver_in_init(void);
/* The shim is built and may be used (also when disabled; false while starting and with no driver). */
static inline bool cg_driver_ready(void);

/* Start-up: 0 not begun, 1 starting, 2 ready, 3 no driver. Inline: every entry point asks. */
extern atomic_int cg_driver_state;
void cg_driver_init_slow(void);
static inline void cg_driver_init(void)
{
	if (atomic_load_explicit(&cg_driver_state, memory_order_acquire) < 2)
		cg_driver_init_slow();
}
static inline bool cg_driver_ready(void)
{
	return atomic_load_explicit(&cg_driver_state, memory_order_acquire) == 2;
}
/* In a fork() child (atfork handler): makes the driver state usable by the one thread there.
 * Returns whether the parent had begun start-up (its shim state is then not the child's). */
bool cg_driver_after_fork(void);
/* A libcuda export outside the lists (newer than our cuda.h), for the shim's own use; NULL when
 * the driver is not loaded or lacks it. Looking it up makes no driver call. */
void *cg_driver_sym(const char *name);
/* What a caller asking for the driver function at `real` gets: the raw pointer for pure entries,
 * our wrapper for boundary and hooked ones, a default-deny trampoline for anything else inside
 * libcuda; `real` itself when it is not in libcuda. `name` is for the report (may be NULL). */
void *cg_handout(void *real, const char *name);
/* The driver's name for a result ("CUDA_ERROR_UNKNOWN" when it has none). */
const char *cg_driver_error_name(CUresult r);
/* True when the address lies inside the loaded libcuda. */
bool cg_in_libcuda(const void *addr);

#endif
