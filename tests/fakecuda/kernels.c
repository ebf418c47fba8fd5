/* The fake's kernels: host functions with the names and parameter layouts of
 * tests/programs/kernels.cu, found by name in any loaded module or library (the image itself is
 * ignored). Also the CUfunction / CUkernel handles and their queries. */
#include "fake.h"
#include <stdlib.h>
#include <string.h>

#define ARG(T, i) ({ T v_; memcpy(&v_, args[i], sizeof v_); v_; })

static void k_chain(void *const *args)
{
  unsigned long long *acc = ARG(unsigned long long *, 0);
  *acc = (*acc * 1000003ULL) ^ ARG(unsigned long long, 1);
}

static void k_fill_f32(void *const *args)
{
  float *p = ARG(float *, 0), v = ARG(float, 1);
  for (int i = 0, n = ARG(int, 2); i < n; i++) p[i] = v;
}

static void k_axpy_f32(void *const *args)
{
  float *y = ARG(float *, 0), a = ARG(float, 2);
  const float *x = ARG(const float *, 1);
  for (int i = 0, n = ARG(int, 3); i < n; i++) y[i] += a * x[i];
}

static void k_scale_f32(void *const *args)
{
  float *p = ARG(float *, 0), a = ARG(float, 1);
  for (int i = 0, n = ARG(int, 2); i < n; i++) p[i] *= a;
}

static void k_step_mix(void *const *args)
{
  float *p = ARG(float *, 0);
  unsigned long long step = ARG(unsigned long long, 2);
  for (int i = 0, n = ARG(int, 1); i < n; i++)
    p[i] = p[i] * 0.5f + (float)((step * 2654435761ULL + (unsigned long long)i) % 1000) / 1000.f;
}

/* Atomic: a host thread may spin on this host-mapped flag with no sync at all (lifecycle --mode
 * spin), as on a GPU's write to mapped memory. */
static void k_set_flag(void *const *args)
{
  __atomic_store_n(ARG(int *, 0), ARG(int, 1), __ATOMIC_RELEASE);
}

/* Marks flag[1], then waits until flag[0] reaches v: a kernel the host holds in place (lifecycle
 * --mode exit-order stops the shim's exit work inside it). */
static void k_wait_flag(void *const *args)
{
  int *flag = ARG(int *, 0), v = ARG(int, 1);
  __atomic_store_n(&flag[1], 1, __ATOMIC_RELEASE);
  while (__atomic_load_n(&flag[0], __ATOMIC_ACQUIRE) < v) {}
}

/* Waits until flag[0] reaches v, in every block on a GPU (a consumer that fills the device while
 * it spins on another stream's producer): here, one wait. */
static void k_wait_all(void *const *args)
{
  int *flag = ARG(int *, 0), v = ARG(int, 1);
  while (__atomic_load_n(&flag[0], __ATOMIC_ACQUIRE) < v) {}
}

/* bench/workloads/mb_kernels.cu's mb_axb: p[i] = p[i]*a + b, so that mb-driver and passthrough
 * run on the fake. */
static void k_mb_axb(void *const *args)
{
  float *p = ARG(float *, 0), a = ARG(float, 1), b = ARG(float, 2);
  for (int i = 0, n = ARG(int, 3); i < n; i++) p[i] = p[i] * a + b;
}

struct big_arg { unsigned long long v[64]; };

static void k_big_arg(void *const *args)
{
  struct big_arg s = ARG(struct big_arg, 0);
  unsigned long long *out = ARG(unsigned long long *, 1), sum = 0;
  for (int i = 0; i < 64; i++) sum += s.v[i];
  *out = (*out * 31) ^ sum;
}

/* A kernel whose work is its launch shape, like one giving each block one row of a growing
 * concatenation: every thread of the grid adds a term of its position, thread 0 of block 0 the
 * dynamic shared memory's size. A run with any other grid, block or shared memory sums
 * differently. */
static void k_grid_sum(void *const *args)
{
  unsigned long long *out = ARG(unsigned long long *, 0), sum = 0;
  const unsigned *in = ARG(const unsigned *, 1);
  const struct cg_shape *s = &cg_tl_shape;
  unsigned long long threads = (unsigned long long)s->block[0] * s->block[1] * s->block[2];
  for (unsigned bz = 0; bz < s->grid[2]; bz++)
    for (unsigned by = 0; by < s->grid[1]; by++)
      for (unsigned bx = 0; bx < s->grid[0]; bx++)
        for (unsigned tz = 0; tz < s->block[2]; tz++)
          for (unsigned ty = 0; ty < s->block[1]; ty++)
            for (unsigned tx = 0; tx < s->block[0]; tx++) {
              unsigned long long b = bx + s->grid[0] * (by + (unsigned long long)s->grid[1] * bz);
              unsigned long long t = tx + s->block[0] * (ty + (unsigned long long)s->block[1] * tz);
              unsigned long long i = b * threads + t;
              sum += (in[i] + 1ULL) * (i + 1) + t * 1000003ULL + by * 31 + bz * 37 + ty * 41 +
                     tz * 43;
            }
  *out += sum + s->shmem * 7919ULL;
}

/* Offsets are filled in by layout(): natural alignment, as nvcc lays out kernel parameters. */
#define K(name_, run_, nparams_, ...) { .name = name_, .run = run_, .nparams = nparams_, .size = { __VA_ARGS__ } }
static struct cg_kernel_def defs[] = {
  K("cg_chain", k_chain, 2, 8, 8),
  K("cg_fill_f32", k_fill_f32, 3, 8, 4, 4),
  K("cg_axpy_f32", k_axpy_f32, 4, 8, 8, 4, 4),
  K("cg_scale_f32", k_scale_f32, 3, 8, 4, 4),
  K("cg_step_mix", k_step_mix, 3, 8, 4, 8),
  K("cg_set_flag", k_set_flag, 2, 8, 4),
  K("cg_wait_flag", k_wait_flag, 2, 8, 4),
  K("cg_wait_all", k_wait_all, 2, 8, 4),
  K("cg_big_arg", k_big_arg, 2, sizeof(struct big_arg), 8),
  K("cg_grid_sum", k_grid_sum, 2, 8, 8),
  K("mb_axb", k_mb_axb, 4, 8, 4, 4, 4),
};
#undef K
#define NDEFS (sizeof defs / sizeof defs[0])

/* Like __launch_bounds__(512) in kernels.cu: a block of more threads is refused. */
#define GRID_SUM_MAX_THREADS 512

static void layout(void)
{
  for (unsigned k = 0; k < NDEFS; k++) {
    unsigned off = 0;
    for (unsigned i = 0; i < defs[k].nparams; i++) {
      unsigned align = defs[k].size[i] >= 8 ? 8 : defs[k].size[i];
      off = (off + align - 1) / align * align;
      defs[k].offset[i] = off;
      off += defs[k].size[i];
    }
    defs[k].total = off;
    if (strcmp(defs[k].name, "cg_grid_sum") == 0) defs[k].max_threads = GRID_SUM_MAX_THREADS;
  }
}

static int def_index(const char *name)
{
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, layout);
  for (unsigned k = 0; name && k < NDEFS; k++)
    if (strcmp(defs[k].name, name) == 0) return (int)k;
  return -1;
}

/* A module or a library: one CUfunction and one CUkernel per built-in kernel. */
struct cg_module {
  enum cg_magic magic;
  CUcontext ctx;            /* a module's context (it dies with it); NULL for a library */
  struct cg_module *next;   /* every module ever loaded, under cg_lock */
  struct cg_func funcs[NDEFS], kerns[NDEFS];
};
static struct cg_module *modules;

static CUresult module_new(struct cg_module **out, CUcontext ctx)
{
  def_index(NULL);  /* layouts must be ready before any handle exists */
  struct cg_module *m = calloc(1, sizeof *m);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  m->magic = CG_MODULE;
  m->ctx = ctx;
  for (unsigned k = 0; k < NDEFS; k++) {
    struct cg_func *f = &m->funcs[k], *kn = &m->kerns[k];
    *f = (struct cg_func){ .magic = CG_FUNC, .def = &defs[k] };
    f->attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = defs[k].max_threads ? (int)defs[k].max_threads : 1024;
    f->attr[CU_FUNC_ATTRIBUTE_NUM_REGS] = 32;
    f->attr[CU_FUNC_ATTRIBUTE_PTX_VERSION] = 80;
    f->attr[CU_FUNC_ATTRIBUTE_BINARY_VERSION] = 90;
    f->owner = m;
    *kn = *f;
    kn->magic = CG_KERNEL;
    kn->other = f;
  }
  pthread_mutex_lock(&cg_lock);
  m->next = modules;
  modules = m;
  pthread_mutex_unlock(&cg_lock);
  *out = m;
  return CUDA_SUCCESS;
}

/* Unloaded modules stay allocated but dead, so stale handles fail cleanly. Caller holds cg_lock. */
static void module_kill(struct cg_module *m)
{
  m->magic = CG_DEAD;
  for (unsigned k = 0; k < NDEFS; k++) m->funcs[k].magic = m->kerns[k].magic = CG_DEAD;
}

static CUresult module_unload(struct cg_module *m)
{
  if (!m || m->magic != CG_MODULE) return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&cg_lock);
  module_kill(m);
  pthread_mutex_unlock(&cg_lock);
  return CUDA_SUCCESS;
}

void cg_modules_ctx_gone(CUcontext ctx)
{
  pthread_mutex_lock(&cg_lock);
  for (struct cg_module *m = modules; m; m = m->next)
    if (m->ctx == ctx && m->magic == CG_MODULE) module_kill(m);
  pthread_mutex_unlock(&cg_lock);
}

static CUresult module_find(struct cg_module *m, const char *name, bool kernel, void **out)
{
  if (!m || m->magic != CG_MODULE) return CUDA_ERROR_INVALID_HANDLE;
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  int k = def_index(name);
  if (k < 0) return CUDA_ERROR_NOT_FOUND;
  *out = kernel ? (void *)&m->kerns[k] : (void *)&m->funcs[k];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
  CG_ENTER(cuModuleLoad);
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (!module || !fname) return CUDA_ERROR_INVALID_VALUE;
  return module_new((struct cg_module **)module, cg_ctx_current());
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
  CG_ENTER(cuModuleLoadData);
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  return module_new((struct cg_module **)module, cg_ctx_current());
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
  CG_ENTER(cuModuleUnload);
  return module_unload((struct cg_module *)hmod);
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
  CG_ENTER(cuModuleGetFunction);
  return module_find((struct cg_module *)hmod, name, false, (void **)hfunc);
}

CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                   void **jitOptionsValues, unsigned int numJitOptions,
                                   CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                   unsigned int numLibraryOptions)
{
  CG_ENTER(cuLibraryLoadData);
  if (!cg_initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  if (!library || !code) return CUDA_ERROR_INVALID_VALUE;
  return module_new((struct cg_module **)library, NULL);
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
  CG_ENTER(cuLibraryUnload);
  return module_unload((struct cg_module *)library);
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
  CG_ENTER(cuLibraryGetKernel);
  return module_find((struct cg_module *)library, name, true, (void **)pKernel);
}

static struct cg_func *as(const void *handle, enum cg_magic magic)
{
  struct cg_func *f = (struct cg_func *)handle;
  return f && f->magic == magic ? f : NULL;
}

const struct cg_kernel_def *cg_launch_def(CUfunction f)
{
  struct cg_func *x = as(f, CG_FUNC);
  if (!x) x = as(f, CG_KERNEL);
  return x ? x->def : NULL;
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
  CG_ENTER(cuKernelGetFunction);
  struct cg_func *k = as(kernel, CG_KERNEL);
  if (!k) return CUDA_ERROR_INVALID_HANDLE;
  if (!pFunc) return CUDA_ERROR_INVALID_VALUE;
  *pFunc = (CUfunction)k->other;
  return CUDA_SUCCESS;
}

/* Counts a query's error: what a debugger would list as a failing call (FAKECUDA_STATS). */
static CUresult answer(CUresult r)
{
  if (r != CUDA_SUCCESS) atomic_fetch_add_explicit(&cg_count.query_errors, 1, memory_order_relaxed);
  return r;
}

static CUresult get_name(const char **name, struct cg_func *f)
{
  if (!f) return answer(CUDA_ERROR_INVALID_HANDLE);
  if (!name) return answer(CUDA_ERROR_INVALID_VALUE);
  *name = f->def->name;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
  CG_ENTER(cuFuncGetName);
  return get_name(name, as(hfunc, CG_FUNC));
}

CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
  CG_ENTER(cuKernelGetName);
  return get_name(name, as(hfunc, CG_KERNEL));
}

/* A fake module is also the library of its CUkernels. */
CUresult CUDAAPI cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
  CG_ENTER(cuFuncGetModule);
  struct cg_func *f = as(hfunc, CG_FUNC);
  if (!f) return answer(CUDA_ERROR_INVALID_HANDLE);
  if (!hmod) return answer(CUDA_ERROR_INVALID_VALUE);
  *hmod = (CUmodule)f->owner;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
  CG_ENTER(cuKernelGetLibrary);
  struct cg_func *k = as(kernel, CG_KERNEL);
  if (!k) return answer(CUDA_ERROR_INVALID_HANDLE);
  if (!pLib) return answer(CUDA_ERROR_INVALID_VALUE);
  *pLib = (CUlibrary)k->owner;
  return CUDA_SUCCESS;
}

static CUresult param_info(struct cg_func *f, size_t index, size_t *offset, size_t *size)
{
  if (!f) return answer(CUDA_ERROR_INVALID_HANDLE);
  if (index >= f->def->nparams || !offset) return answer(CUDA_ERROR_INVALID_VALUE);
  *offset = f->def->offset[index];
  if (size) *size = f->def->size[index];
  return CUDA_SUCCESS;
}

static CUresult param_count(struct cg_func *f, size_t *count)
{
  if (!f) return answer(CUDA_ERROR_INVALID_HANDLE);
  if (!count) return answer(CUDA_ERROR_INVALID_VALUE);
  *count = f->def->nparams;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetParamCount(CUfunction func, size_t *paramCount)
{
  CG_ENTER(cuFuncGetParamCount);
  return param_count(as(func, CG_FUNC), paramCount);
}

CUresult CUDAAPI cuKernelGetParamCount(CUkernel kernel, size_t *paramCount)
{
  CG_ENTER(cuKernelGetParamCount);
  return param_count(as(kernel, CG_KERNEL), paramCount);
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                    size_t *paramSize)
{
  CG_ENTER(cuFuncGetParamInfo);
  return param_info(as(func, CG_FUNC), paramIndex, paramOffset, paramSize);
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                      size_t *paramSize)
{
  CG_ENTER(cuKernelGetParamInfo);
  return param_info(as(kernel, CG_KERNEL), paramIndex, paramOffset, paramSize);
}

/* Attributes are stored per handle; the real driver, like this one, takes a CUkernel where a
 * CUfunction is expected for attributes. */
static CUresult attr_get(int *pi, CUfunction_attribute attrib, const void *handle)
{
  struct cg_func *f = as(handle, CG_FUNC);
  if (!f) f = as(handle, CG_KERNEL);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (!pi || attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  *pi = f->attr[attrib];
  pthread_mutex_unlock(&cg_lock);
  return CUDA_SUCCESS;
}

/* Only these can be set (cuda.h); the others (threads per block among them) are properties of
 * the compiled function. Dynamic shared memory may be raised up to the device's opt-in limit
 * and lowered again. */
static bool settable(CUfunction_attribute attrib, int value)
{
  switch (attrib) {
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: return value >= 0 && value <= 232448;
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
  case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
  case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: return true;
  default: return false;
  }
}

static CUresult attr_set(CUfunction_attribute attrib, int value, const void *handle)
{
  struct cg_func *f = as(handle, CG_FUNC);
  if (!f) f = as(handle, CG_KERNEL);
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  if (!settable(attrib, value)) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  f->attr[attrib] = value;
  pthread_mutex_unlock(&cg_lock);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
  CG_ENTER(cuFuncGetAttribute);
  return attr_get(pi, attrib, hfunc);
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
  CG_ENTER(cuFuncSetAttribute);
  return attr_set(attrib, value, hfunc);
}

CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel,
                                      CUdevice dev)
{
  CG_ENTER(cuKernelGetAttribute);
  return dev == 0 ? attr_get(pi, attrib, kernel) : CUDA_ERROR_INVALID_DEVICE;
}

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel,
                                      CUdevice dev)
{
  CG_ENTER(cuKernelSetAttribute);
  return dev == 0 ? attr_set(attrib, val, kernel) : CUDA_ERROR_INVALID_DEVICE;
}
