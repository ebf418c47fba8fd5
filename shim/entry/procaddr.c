/* cuGetProcAddress hooks: libcudart fetches every driver function this way (with a CUDA version
 * and per-thread-stream flags), so each answer is mapped to the shim's pointer for that entry
 * point (driver.c). The driver resolves version and flags itself; we never guess an ABI. Also
 * lookups made inside NCCL or the shim get wrappers (cg_handout returns raw pointers only when
 * disabled): a pointer kept from there may be called by the program later, and the wrappers
 * themselves let calls made inside NCCL through untouched. */
#include "shim/loader/driver.h"
#include "shim/base/shim.h"

CG_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	cg_driver_init();
	if (!cg_real[CG_E_cuGetProcAddress_v2])
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = CG_REAL(cuGetProcAddress_v2)(symbol, pfn, cudaVersion, flags, symbolStatus);
	if (r == CUDA_SUCCESS && pfn && *pfn)
		*pfn = cg_handout(*pfn, symbol);
	return r;
}

CG_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	cg_driver_init();
	if (!cg_real[CG_E_cuGetProcAddress])
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = CG_REAL(cuGetProcAddress)(symbol, pfn, cudaVersion, flags);
	if (r == CUDA_SUCCESS && pfn && *pfn)
		*pfn = cg_handout(*pfn, symbol);
	return r;
}
