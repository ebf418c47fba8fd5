/* Module and library loads: forwarded unchanged; once the driver has accepted an image, the
 * kernels' parameter layouts it states are recorded for the module or library handle it became
 * (image.c), so that layout.c asks the driver about exactly the parameters that exist. The image
 * is read during the call only (the caller may free it after), never written. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim/loader/counts.h"
#include "shim/loader/driver.h"
#include "shim/base/image.h"
#include "shim/base/log.h"
#include "shim/base/shim.h"

/* Records even on pass-through threads (NCCL's own loads): reading an image makes no driver
 * call a program could see, and a layout asked later on another thread may need it. Not with a
 * driver that counts parameters itself (cuFuncGetParamCount, cuKernelGetParamCount: layout.c
 * asks those first). */
static bool recording(void)
{
	static atomic_int counts = -1; /* the driver has both count entry points: 1, not: 0 */
	if (!cg_driver_ready() || cg_shim_disabled())
		return false;
	int c = atomic_load_explicit(&counts, memory_order_relaxed);
	if (c < 0) {
		c = cg_driver_sym("cuFuncGetParamCount") && cg_driver_sym("cuKernelGetParamCount");
		atomic_store_explicit(&counts, c, memory_order_relaxed);
	}
	return !c;
}

/* The driver has entry point e (it is then counted, unless the call passes through). */
static bool found(enum cg_entry e)
{
	cg_driver_init();
	if (!cg_real[e])
		return false;
	if (!cg_shim_passthrough())
		cg_count(CG_COUNT_ENTRY + e);
	return true;
}

/* The current device's architecture as fat binaries number it (90: sm_90), or 0 (no current
 * context): compressed entries of other architectures are then not decoded. Asked only for
 * images with compressed entries. Every call here succeeds: no context is asked for its device. */
static unsigned current_sm(void)
{
	CUcontext ctx = NULL;
	CUdevice dev;
	int major = 0, minor = 0;
	if (!cg_real[CG_E_cuCtxGetCurrent] || !cg_real[CG_E_cuCtxGetDevice] ||
	    !cg_real[CG_E_cuDeviceGetAttribute] || CG_REAL(cuCtxGetCurrent)(&ctx) != CUDA_SUCCESS ||
	    !ctx || CG_REAL(cuCtxGetDevice)(&dev) != CUDA_SUCCESS ||
	    CG_REAL(cuDeviceGetAttribute)(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
	    CG_REAL(cuDeviceGetAttribute)(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS ||
	    major <= 0 || minor < 0)
		return 0;
	return (unsigned)(major * 10 + minor);
}

static void noted(const char *entry, const void *handle, int n)
{
	cg_log(CG_LOG_DEBUG, "%s: %d kernel layouts read from the image of %p%s", entry, n < 0 ? 0 : n,
	       handle, n < 0 ? " (image not understood)" : "");
}

static CUresult loaded(const char *entry, CUresult r, const void *handle, const void *image)
{
	if (r == CUDA_SUCCESS && handle && image && recording())
		noted(entry, handle, cg_image_record((uintptr_t)handle, image, SIZE_MAX, current_sm));
	return r;
}

/* A file the driver has just loaded, mapped read-only for the scan; its size bounds it. */
static CUresult loaded_file(const char *entry, CUresult r, const void *handle, const char *path)
{
	if (r != CUDA_SUCCESS || !handle || !path || !recording())
		return r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return r;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p != MAP_FAILED) {
			noted(entry, handle, cg_image_record((uintptr_t)handle, p, (size_t)st.st_size, current_sm));
			munmap(p, (size_t)st.st_size);
		}
	}
	close(fd);
	return r;
}

CG_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	if (!found(CG_E_cuModuleLoadData))
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = CG_REAL(cuModuleLoadData)(module, image);
	return loaded("cuModuleLoadData", r, r == CUDA_SUCCESS && module ? *module : NULL, image);
}

CG_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                      CUjit_option *options, void **optionValues)
{
	if (!found(CG_E_cuModuleLoadDataEx))
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = CG_REAL(cuModuleLoadDataEx)(module, image, numOptions, options, optionValues);
	return loaded("cuModuleLoadDataEx", r, r == CUDA_SUCCESS && module ? *module : NULL, image);
}

CG_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	if (!found(CG_E_cuModuleLoadFatBinary))
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = CG_REAL(cuModuleLoadFatBinary)(module, fatCubin);
	return loaded("cuModuleLoadFatBinary", r, r == CUDA_SUCCESS && module ? *module : NULL, fatCubin);
}

CG_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                     void **jitOptionsValues, unsigned int numJitOptions,
                                     CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                     unsigned int numLibraryOptions)
{
	if (!found(CG_E_cuLibraryLoadData))
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = CG_REAL(cuLibraryLoadData)(library, code, jitOptions, jitOptionsValues, numJitOptions,
	                                        libraryOptions, libraryOptionValues, numLibraryOptions);
	return loaded("cuLibraryLoadData", r, r == CUDA_SUCCESS && library ? *library : NULL, code);
}

CG_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	if (!found(CG_E_cuModuleLoad))
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = CG_REAL(cuModuleLoad)(module, fname);
	return loaded_file("cuModuleLoad", r, r == CUDA_SUCCESS && module ? *module : NULL, fname);
}

CG_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                         void **jitOptionsValues, unsigned int numJitOptions,
                                         CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                         unsigned int numLibraryOptions)
{
	if (!found(CG_E_cuLibraryLoadFromFile))
		return CUDA_ERROR_NOT_FOUND;
	CUresult r = CG_REAL(cuLibraryLoadFromFile)(library, fileName, jitOptions, jitOptionsValues, numJitOptions,
	                                            libraryOptions, libraryOptionValues, numLibraryOptions);
	return loaded_file("cuLibraryLoadFromFile", r, r == CUDA_SUCCESS && library ? *library : NULL, fileName);
}
