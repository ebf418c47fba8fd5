/* The fake's one device ("FakeCUDA CPU") and its contexts: the primary context (reference
 * counted) and created ones, each thread with its own stack of current contexts. Destroyed
 * contexts stay allocated but dead, so a stale handle is an error and never a crash. */
#include "fake.h"
#include <stdlib.h>
#include <string.h>

static struct cg_ctx primary = { CG_CTX, true };
static unsigned primary_refs, primary_flags;

#define CTX_STACK_MAX 16
static __thread CUcontext ctx_stack[CTX_STACK_MAX];
static __thread unsigned ctx_depth;

bool cg_ctx_live(CUcontext c)
{
  struct cg_ctx *x = (struct cg_ctx *)c;
  if (!x || x->magic != CG_CTX) return false;
  if (!x->primary) return true;
  pthread_mutex_lock(&cg_lock);
  bool live = primary_refs > 0;
  pthread_mutex_unlock(&cg_lock);
  return live;
}

CUcontext cg_ctx_current(void) { return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL; }

CUresult cg_need_ctx(void)
{
  if (!cg_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  return cg_ctx_live(cg_ctx_current()) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult check_device(CUdevice dev)
{
  if (!cg_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
  CG_ENTER(cuDeviceGet);
  if (!cg_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
  CG_ENTER(cuDeviceGetCount);
  if (!cg_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
  CG_ENTER(cuDeviceGetName);
  CUresult r = check_device(dev);
  if (r != CUDA_SUCCESS) return r;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  strncpy(name, "FakeCUDA CPU", (size_t)len - 1);
  name[len - 1] = '\0';
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
  CG_ENTER(cuDeviceGetAttribute);
  CUresult r = check_device(dev);
  if (r != CUDA_SUCCESS) return r;
  if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  switch (attrib) {  /* an H100-like device; anything not listed is 0 (unsupported feature) */
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 49152; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 232448; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
  case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1980000; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = 2048; break;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *pi = 65536; break;
  case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
  case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    *pi = 1; break;
  default: *pi = 0;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
  CG_ENTER(cuDevicePrimaryCtxRetain);
  CUresult r = check_device(dev);
  if (r != CUDA_SUCCESS) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  primary_refs++;
  pthread_mutex_unlock(&cg_lock);
  *pctx = (CUcontext)&primary;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
  CG_ENTER(cuDevicePrimaryCtxRelease_v2);
  CUresult r = check_device(dev);
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&cg_lock);
  r = primary_refs ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  if (primary_refs) primary_refs--;
  pthread_mutex_unlock(&cg_lock);
  return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
  CG_ENTER(cuDevicePrimaryCtxGetState);
  CUresult r = check_device(dev);
  if (r != CUDA_SUCCESS) return r;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  *flags = primary_flags;
  *active = primary_refs > 0;
  pthread_mutex_unlock(&cg_lock);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
  CG_ENTER(cuDevicePrimaryCtxReset_v2);
  CUresult r = check_device(dev);
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&cg_lock);
  primary_refs = 0;
  primary_flags = 0;
  pthread_mutex_unlock(&cg_lock);
  return CUDA_SUCCESS;
}

static CUresult push(CUcontext c)
{
  if (ctx_depth == CTX_STACK_MAX) return CUDA_ERROR_OUT_OF_MEMORY;
  ctx_stack[ctx_depth++] = c;
  return CUDA_SUCCESS;
}

static CUresult create(CUcontext *pctx, CUdevice dev)
{
  CUresult r = check_device(dev);
  if (r != CUDA_SUCCESS) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  struct cg_ctx *c = malloc(sizeof *c);
  if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
  *c = (struct cg_ctx){ CG_CTX, false };
  if ((r = push((CUcontext)c)) != CUDA_SUCCESS) { free(c); return r; }
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
  CG_ENTER(cuCtxCreate_v2);
  return create(pctx, dev);
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                unsigned int flags, CUdevice dev)
{
  CG_ENTER(cuCtxCreate_v4);
  return create(pctx, dev);
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
  CG_ENTER(cuCtxDestroy_v2);
  struct cg_ctx *c = (struct cg_ctx *)ctx;
  if (!c || c->magic != CG_CTX || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
  c->magic = CG_DEAD;
  cg_modules_ctx_gone(ctx);
  if (cg_ctx_current() == ctx) ctx_depth--;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
  CG_ENTER(cuCtxGetCurrent);
  if (!cg_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = cg_ctx_current();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
  CG_ENTER(cuCtxSetCurrent);
  if (!cg_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx && !cg_ctx_live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx_depth == 0) return ctx ? push(ctx) : CUDA_SUCCESS;
  ctx_stack[ctx_depth - 1] = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
  CG_ENTER(cuCtxPushCurrent_v2);
  if (!cg_ctx_live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  return push(ctx);
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
  CG_ENTER(cuCtxPopCurrent_v2);
  if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  CUcontext c = ctx_stack[--ctx_depth];
  if (pctx) *pctx = c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
  CG_ENTER(cuCtxGetDevice);
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}

/* CUDA 13: the device of a given context (NULL: the current one). One device: 0. */
CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
  CG_ENTER(cuCtxGetDevice_v2);
  if (!ctx) return cuCtxGetDevice(device);
  if (!cg_ctx_live(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = 0;
  return CUDA_SUCCESS;
}

/* Work runs at launch, so there is nothing to wait for but the simulated device (fake.h). */
CUresult CUDAAPI cuCtxSynchronize(void)
{
  CG_ENTER(cuCtxSynchronize);
  CUresult r = cg_need_ctx();
  if (r == CUDA_SUCCESS) cg_gpu_wait(false);
  return r;
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
  CG_ENTER(cuCtxGetStreamPriorityRange);
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (leastPriority) *leastPriority = 0;
  if (greatestPriority) *greatestPriority = -5;
  return CUDA_SUCCESS;
}
