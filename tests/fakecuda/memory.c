/* Memory of the fake driver: "device" memory is host memory (a CUdeviceptr is an address),
 * pinned host memory is plain host memory mapped at the same address. Copies and memsets run
 * at once; async memsets and device-to-device copies on a capturing stream become graph nodes.
 * Live allocations are kept in a table, so that memsets and copies are refused, as the real
 * driver refuses them, outside an allocation, and cuMemGetAddressRange answers. */
#include "fake.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define TOTAL_MEM (16ULL << 30)
#define ALIGN 256  /* the real allocator's minimum alignment; header holds the size */
static atomic_ullong allocated;

/* --- the allocation table: [base, base + size) of every live allocation ----------------------- */
#define MAX_ALLOCS 4096
static struct { uintptr_t base; size_t size; } allocs[MAX_ALLOCS];
static size_t nallocs;
static pthread_mutex_t allocs_lock = PTHREAD_MUTEX_INITIALIZER;

static void allocs_add(const void *p, size_t size)
{
  pthread_mutex_lock(&allocs_lock);
  if (nallocs < MAX_ALLOCS) allocs[nallocs++] = (__typeof__(allocs[0])){ (uintptr_t)p, size };
  pthread_mutex_unlock(&allocs_lock);
}

static void allocs_remove(const void *p)
{
  pthread_mutex_lock(&allocs_lock);
  for (size_t i = 0; i < nallocs; i++)
    if (allocs[i].base == (uintptr_t)p) { allocs[i] = allocs[--nallocs]; break; }
  pthread_mutex_unlock(&allocs_lock);
}

/* The allocation holding p: its base and size; false when none does. */
static bool allocs_find(uintptr_t p, uintptr_t *base, size_t *size)
{
  bool found = false;
  pthread_mutex_lock(&allocs_lock);
  for (size_t i = 0; i < nallocs && !found; i++)
    if (p >= allocs[i].base && p - allocs[i].base < allocs[i].size) {
      *base = allocs[i].base;
      *size = allocs[i].size;
      found = true;
    }
  pthread_mutex_unlock(&allocs_lock);
  return found;
}

/* [p, p + n) lies inside one live allocation (n 0: p does). The table overflowing (a program of
 * more than MAX_ALLOCS allocations) makes no range checkable: every one is accepted then. */
bool cg_mem_range_ok(CUdeviceptr p, size_t n)
{
  uintptr_t base;
  size_t size;
  if (!p) return false;
  if (nallocs >= MAX_ALLOCS) return true;
  if (!allocs_find((uintptr_t)p, &base, &size)) return false;
  return n <= size - ((uintptr_t)p - base);
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
  CG_ENTER(cuMemGetAddressRange_v2);
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  uintptr_t base;
  size_t size;
  if (!allocs_find((uintptr_t)dptr, &base, &size)) return CUDA_ERROR_NOT_FOUND;
  if (pbase) *pbase = (CUdeviceptr)base;
  if (psize) *psize = size;
  return CUDA_SUCCESS;
}

/* Graphs hold device memory on a real GPU: an instantiated graph here takes GRAPH_MEM_BASE and
 * GRAPH_MEM_NODE per node of what cuMemGetInfo reports free, until it is destroyed. */
#define GRAPH_MEM_BASE (64u << 10)
#define GRAPH_MEM_NODE 256u

size_t cg_graph_mem_take(size_t nodes)
{
  size_t bytes = GRAPH_MEM_BASE + nodes * GRAPH_MEM_NODE;
  atomic_fetch_add(&allocated, bytes);
  return bytes;
}

void cg_graph_mem_give(size_t bytes)
{
  atomic_fetch_sub(&allocated, bytes);
}

void cg_memset(CUdeviceptr dst, unsigned value, unsigned elem, size_t n)
{
  if (elem == 1) { memset((void *)dst, (int)value, n); return; }
  for (size_t i = 0; i < n; i++) {
    if (elem == 2) ((uint16_t *)dst)[i] = (uint16_t)value;
    else ((uint32_t *)dst)[i] = value;
  }
}

static void count_memop(void) { atomic_fetch_add_explicit(&cg_count.memops_run, 1, memory_order_relaxed); }

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
  CG_ENTER(cuMemGetInfo_v2);
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (!free || !total) return CUDA_ERROR_INVALID_VALUE;
  *total = TOTAL_MEM;
  unsigned long long used = atomic_load(&allocated);
  *free = used < TOTAL_MEM ? TOTAL_MEM - used : 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
  CG_ENTER(cuMemAlloc_v2);
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (!dptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t rounded = (bytesize + ALIGN - 1) / ALIGN * ALIGN;
  unsigned char *p = rounded < TOTAL_MEM ? aligned_alloc(ALIGN, rounded + ALIGN) : NULL;
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(p, &bytesize, sizeof bytesize);
  atomic_fetch_add(&allocated, bytesize);
  *dptr = (CUdeviceptr)(p + ALIGN);
  allocs_add(p + ALIGN, bytesize);
  return CUDA_SUCCESS;
}

/* Managed memory is host memory here like everything else; the flags are not checked. */
CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
  CG_ENTER(cuMemAllocManaged);
  (void)flags;
  return cuMemAlloc_v2(dptr, bytesize);
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
  CG_ENTER(cuMemFree_v2);
  if (!dptr) return CUDA_SUCCESS;
  unsigned char *p = (unsigned char *)dptr - ALIGN;
  size_t size;
  memcpy(&size, p, sizeof size);
  allocs_remove((void *)dptr);
  atomic_fetch_sub(&allocated, size);
  free(p);
  return CUDA_SUCCESS;
}

static CUresult host_alloc(void **pp, size_t bytesize)
{
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  *pp = aligned_alloc(ALIGN, (bytesize + ALIGN - 1) / ALIGN * ALIGN);
  if (*pp) allocs_add(*pp, bytesize);
  return *pp ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
  CG_ENTER(cuMemAllocHost_v2);
  return host_alloc(pp, bytesize);
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
  CG_ENTER(cuMemHostAlloc);
  return host_alloc(pp, bytesize);
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
  CG_ENTER(cuMemFreeHost);
  allocs_remove(p);
  free(p);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
  CG_ENTER(cuMemHostGetDevicePointer_v2);
  if (!pdptr || !p || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = (CUdeviceptr)p;
  return CUDA_SUCCESS;
}

/* Synchronous copies and memsets. */
static CUresult copy(void *dst, const void *src, size_t n)
{
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (n && (!dst || !src)) return CUDA_ERROR_INVALID_VALUE;
  memmove(dst, src, n);
  count_memop();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
  CG_ENTER(cuMemcpyHtoD_v2);
  cg_gpu_wait(true);
  return copy((void *)dstDevice, srcHost, ByteCount);
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
  CG_ENTER(cuMemcpyDtoH_v2);
  cg_gpu_wait(true);
  return copy(dstHost, (const void *)srcDevice, ByteCount);
}

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
  CG_ENTER(cuMemcpyDtoD_v2);
  if (!cg_mem_range_ok(dstDevice, ByteCount) || !cg_mem_range_ok(srcDevice, ByteCount))
    return CUDA_ERROR_INVALID_VALUE;
  cg_gpu_wait(true);
  return copy((void *)dstDevice, (const void *)srcDevice, ByteCount);
}

static CUresult set(CUdeviceptr dst, unsigned value, unsigned elem, size_t n)
{
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (dst % elem || !cg_mem_range_ok(dst, n * elem)) return CUDA_ERROR_INVALID_VALUE;
  cg_memset(dst, value, elem, n);
  count_memop();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
  CG_ENTER(cuMemsetD8_v2);
  cg_gpu_wait(true);
  return set(dstDevice, uc, 1, N);
}

CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
  CG_ENTER(cuMemsetD32_v2);
  cg_gpu_wait(true);
  return set(dstDevice, ui, 4, N);
}

/* Stream-ordered copies: host<->device ones are boundaries (refused while capturing, not
 * modelled as graph nodes); device-to-device ones are captured. */
static CUresult copy_async(void *dst, const void *src, size_t n, CUstream hStream, bool capturable)
{
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (n && (!dst || !src)) return CUDA_ERROR_INVALID_VALUE;
  if (capturable && (!cg_mem_range_ok((CUdeviceptr)dst, n) || !cg_mem_range_ok((CUdeviceptr)src, n)))
    return CUDA_ERROR_INVALID_VALUE;  /* device to device: both ends checked */
  if (!cg_capturing(s)) {
    cg_gpu_run(s, 1, false);
    return copy(dst, src, n);
  }
  if (!capturable) return cg_capture_refuse(s);
  struct cg_node node = { .magic = CG_NODE, .kind = CG_NODE_MEMCPY,
                          .u.cpy = { (CUdeviceptr)dst, (CUdeviceptr)src, n } };
  return cg_capture_node(s, &node);
}

CG_TWINS(cuMemcpyHtoDAsync_v2,
          (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream),
          copy_async((void *)dstDevice, srcHost, ByteCount, hStream, false))

CG_TWINS(cuMemcpyDtoHAsync_v2,
          (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
          copy_async(dstHost, (const void *)srcDevice, ByteCount, hStream, false))

CG_TWINS(cuMemcpyDtoDAsync_v2,
          (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),
          copy_async((void *)dstDevice, (const void *)srcDevice, ByteCount, hStream, true))

static CUresult set_async(CUdeviceptr dst, unsigned value, unsigned elem, size_t n, CUstream hStream)
{
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (dst % elem || !cg_mem_range_ok(dst, n * elem)) return CUDA_ERROR_INVALID_VALUE;
  if (!cg_capturing(s)) {
    cg_gpu_run(s, 1, false);
    return set(dst, value, elem, n);
  }
  struct cg_node node = { .magic = CG_NODE, .kind = CG_NODE_MEMSET,
                          .u.set = { dst, value, elem, n, 1, n * elem } };
  return cg_capture_node(s, &node);
}

CG_TWINS(cuMemsetD8Async, (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream),
          set_async(dstDevice, uc, 1, N, hStream))

CG_TWINS(cuMemsetD32Async, (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream),
          set_async(dstDevice, ui, 4, N, hStream))
