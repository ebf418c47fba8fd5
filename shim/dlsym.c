/* The dlsym hook: libcudart, PyTorch, Triton and NCCL fetch driver entry points with dlsym on a
 * libcuda handle, which LD_PRELOAD alone never sees. Lookups that land inside libcuda are handed
 * the shim's pointer for that entry point (driver.c); all others are returned unchanged. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "driver.h"
#include "shim.h"

void *cg_dlsym_hook(void *handle, const char *name);
void *cg_dlsym_hook(void *handle, const char *name)
{
	void *real = cg_real_dlsym(handle, name);
#ifdef CG_HAVE_NCCL
	/* NCCL's API looked up on a libnccl handle (a framework that loads NCCL itself). */
	if (real && name && strncmp(name, "nccl", 4) == 0)
		return cg_nccl_handout(real, name);
#endif
	if (!real || !name || name[0] != 'c' || name[1] != 'u' || cg_shim_in_init())
		return real;
	/* Only lookups that land in libcuda concern us (curl_* starts with "cu" too); processes
	 * that never touch the driver must not get it loaded by us. Our own exported wrappers,
	 * found through RTLD_DEFAULT, are not in libcuda and are returned as they are. */
	Dl_info info;
	if (!dladdr(real, &info) || !info.dli_fname || !strstr(info.dli_fname, "libcuda.so"))
		return real;
	cg_driver_init();
	if (!cg_driver_ready())
		return real;
	return cg_handout(real, name);
}
