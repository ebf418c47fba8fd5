/* cuGetProcAddress of the fake driver: base name -> exported function, choosing the newest ABI
 * whose version is <= the requested CUDA version and the _ptsz variant when the caller asks for
 * per-thread default stream semantics. Pointers are the exports themselves, so a shim can map
 * them back to entry points by comparing with dlsym results. */
#include "fake.h"
#include <string.h>

/* FAKECUDA_DRIVER_VERSION: the build that plays an older driver leaves out the newer rows (its
 * export map hides their symbols too). */
#ifndef FAKECUDA_DRIVER_VERSION
#define FAKECUDA_DRIVER_VERSION 99999
#endif
static const struct proc_row { const char *base; int version; bool ptsz; void *fn; } rows[] = {
#define CG_API(sym, base, ver, per_thread) { #base, ver > FAKECUDA_DRIVER_VERSION ? 1000000 : ver, per_thread, (void *)&sym },
#include "api.def"
#undef CG_API
};

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  bool want_ptsz = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const struct proc_row *best = NULL;
  bool known = false;
  for (unsigned i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const struct proc_row *r = &rows[i];
    if (strcmp(r->base, symbol) != 0) continue;
    known = true;
    if (r->version > cudaVersion) continue;
    /* a _ptsz row wins only when asked for; a legacy row wins over a _ptsz one otherwise */
    if (r->ptsz && !want_ptsz) continue;
    if (!best || r->ptsz > best->ptsz || (r->ptsz == best->ptsz && r->version > best->version))
      best = r;
  }
  *pfn = best ? best->fn : NULL;
  if (status)
    *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
                   : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                           : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
  CG_ENTER(cuGetProcAddress_v2);
  return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
  CG_ENTER(cuGetProcAddress);
  return lookup(symbol, pfn, cudaVersion, flags, NULL);
}
