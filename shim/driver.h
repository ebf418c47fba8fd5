/* The driver as the shim sees it: every entry point of cuda.def as an id, the real libcuda
 * pointers behind them, and the table that maps a real pointer to what a caller is handed
 * (the raw pointer, a wrapper, or a default-deny trampoline). */
#ifndef CG_SHIM_DRIVER_H
#define CG_SHIM_DRIVER_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* cuda.h renames these to their newest ABI; the list names the exported symbols as they are. */
#undef cuGetProcAddress
#undef cuEventElapsedTime
#undef cuDeviceGetUuid
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuCtxDestroy
#undef cuStreamDestroy
/* The first ABI of entry points the list hooks in both versions (older runtimes ask for them). */
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuDevicePrimaryCtxReset(CUdevice dev);
CUresult cuCtxDestroy(CUcontext ctx);
CUresult cuStreamDestroy(CUstream hStream);

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
/* Real libcuda pointers, filled once by cg_driver_init(); NULL where the driver lacks one. */
extern void *cg_real[CG_E_COUNT];

/* The real pointer of a list entry, typed after its cuda.h prototype. */
#define CG_REAL(name) ((__typeof__(&name))cg_real[CG_E_##name])

/* Loads (or finds) libcuda, fills cg_real and starts the shim (cg_shim_start) once. Safe to call
 * from any hook, any thread, often: while one thread starts, the others wait until the shim is
 * ready (that thread's own calls meanwhile return at once and pass through). */
void cg_driver_init(void);
/* The shim is built and may be used (also when disabled; false while starting and with no driver). */
bool cg_driver_ready(void);
/* In a fork() child (atfork handler): makes the driver state usable by the one thread there.
 * Returns whether the parent had begun start-up (its shim state is then not the child's). */
bool cg_driver_after_fork(void);
/* The real dlsym and dlvsym, resolved on first use. Called from here, RTLD_DEFAULT and
 * RTLD_NEXT mean libcugraft's scope, not the program's: the hooks pass those lookups on. */
void *cg_real_dlsym(void *handle, const char *name);
void *cg_real_dlvsym(void *handle, const char *name, const char *version);
/* The real functions themselves (NULL if not found), for the hooks' tail jumps. */
void *cg_resolve_real_dlsym(void);
void *cg_resolve_real_dlvsym(void);
/* A libcuda export outside the lists (newer than our cuda.h), for the shim's own use; NULL when
 * the driver is not loaded or lacks it. Looking it up makes no driver call. */
void *cg_driver_sym(const char *name);
/* What a caller asking for the driver function at `real` gets: the raw pointer for pure entries,
 * our wrapper for boundary and hooked ones, a default-deny trampoline for anything else inside
 * libcuda; `real` itself when it is not in libcuda. `name` is for the report (may be NULL). */
void *cg_handout(void *real, const char *name);
/* nccl.c: what a dlsym of an NCCL name gets: our wrapper for a listed entry whose real function
 * lies in libnccl, else `real`. */
void *cg_nccl_handout(void *real, const char *name);
/* True when the address lies inside the loaded libcuda. */
bool cg_in_libcuda(const void *addr);

#endif
