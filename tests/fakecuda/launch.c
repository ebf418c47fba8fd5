/* Kernel launches (cuLaunchKernel, cuLaunchKernelEx, kernelParams or `extra` form) and host
 * functions. Outside capture a kernel runs at once on the calling thread; on a capturing stream
 * it becomes a graph node holding a copy of its parameter bytes. */
#include "fake.h"
#include <stdlib.h>
#include <string.h>

/* Points args[i] at parameter i, from kernelParams or from the CU_LAUNCH_PARAM_BUFFER_* list. */
static CUresult gather(const struct cg_kernel_def *def, void **params, void **extra, void *args[])
{
  if (params && !extra) {
    for (unsigned i = 0; i < def->nparams; i++)
      if (!(args[i] = params[i])) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
  }
  if (!extra) return def->nparams ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  if (params) return CUDA_ERROR_INVALID_VALUE;
  unsigned char *buf = NULL;
  size_t *size = NULL;
  for (unsigned i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = extra[i + 1];
    else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) size = extra[i + 1];
    else return CUDA_ERROR_INVALID_VALUE;
  }
  if (!buf || !size || *size < def->total) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < def->nparams; i++) args[i] = buf + def->offset[i];
  return CUDA_SUCCESS;
}

_Thread_local struct cg_shape cg_tl_shape;

static unsigned long long shape_hash(const char *name, const struct cg_shape *shape)
{
  unsigned long long h = 14695981039346656037ULL;
  for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
  for (int i = 0; i < 3; i++)
    h = ((h ^ shape->grid[i]) * 1099511628211ULL ^ shape->block[i]) * 1099511628211ULL;
  h = (h ^ shape->shmem) * 1099511628211ULL;
  return h ^ (h >> 29);
}

static void run_kernel(const struct cg_kernel_def *def, void *const *args,
                       const struct cg_shape *shape)
{
  cg_tl_shape = *shape;
  def->run(args);
  atomic_fetch_add_explicit(&cg_count.kernels_run, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&cg_count.launch_shapes, shape_hash(def->name, shape),
                            memory_order_relaxed);
  cg_log_run(def->name, shape);
}

static const struct cg_func *func_of(CUfunction f)
{
  const struct cg_func *x = (const struct cg_func *)f;
  return x && (x->magic == CG_FUNC || x->magic == CG_KERNEL) ? x : NULL;
}

CUresult cg_shape_check(CUfunction f, const struct cg_shape *shape, const CUlaunchAttribute *attrs,
                        unsigned nattrs)
{
  const struct cg_func *x = func_of(f);
  if (!x) return CUDA_ERROR_INVALID_HANDLE;
  const unsigned *g = shape->grid, *b = shape->block;
  if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2] || g[0] > 0x7fffffffu ||
      g[1] > 65535 || g[2] > 65535 || b[0] > 1024 || b[1] > 1024 || b[2] > 64)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  unsigned max_threads = (unsigned)x->attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
  unsigned max_shmem = (unsigned)x->attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
  pthread_mutex_unlock(&cg_lock);
  if ((unsigned long long)b[0] * b[1] * b[2] > max_threads) return CUDA_ERROR_INVALID_VALUE;
  if (shape->shmem > 48 * 1024 && shape->shmem > max_shmem) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; attrs && i < nattrs; i++) {
    if (attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) continue;
    const unsigned c[3] = { attrs[i].value.clusterDim.x, attrs[i].value.clusterDim.y,
                            attrs[i].value.clusterDim.z };
    for (int d = 0; d < 3; d++)
      if (!c[d] || g[d] % c[d]) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  /* A preferred substitute cluster (cuda.h, preferredClusterDim): x and y divide the grid and are
   * multiples of the regular cluster's, z equals the regular cluster's (1 without one). */
  for (unsigned i = 0; attrs && i < nattrs; i++) {
    if (attrs[i].id != CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION) continue;
    unsigned c[3] = { 1, 1, 1 };
    for (unsigned j = 0; j < nattrs; j++)
      if (attrs[j].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
        c[0] = attrs[j].value.clusterDim.x;
        c[1] = attrs[j].value.clusterDim.y;
        c[2] = attrs[j].value.clusterDim.z;
      }
    const unsigned p[3] = { attrs[i].value.preferredClusterDim.x, attrs[i].value.preferredClusterDim.y,
                            attrs[i].value.preferredClusterDim.z };
    for (int d = 0; d < 2; d++)
      if (!p[d] || !c[d] || g[d] % p[d] || p[d] % c[d]) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    if (p[2] != c[2]) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  return CUDA_SUCCESS;
}

CUresult cg_node_set_kernel(struct cg_node *n, CUfunction f, const unsigned grid[3],
                            const unsigned block[3], unsigned shmem, void **params, void **extra)
{
  const struct cg_kernel_def *def = cg_launch_def(f);
  if (!def) return CUDA_ERROR_INVALID_HANDLE;
  void *args[CG_MAX_PARAMS];
  CUresult r = gather(def, params, extra, args);
  if (r != CUDA_SUCCESS) return r;
  unsigned char *bytes = malloc(def->total ? def->total : 1);
  if (!bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  memset(n, 0, sizeof *n);
  n->magic = CG_NODE;
  n->kind = CG_NODE_KERNEL;
  bool is_kernel = *(const enum cg_magic *)f == CG_KERNEL;
  n->u.k.func = is_kernel ? NULL : f;
  n->u.k.kern = is_kernel ? (CUkernel)f : NULL;
  n->u.k.def = def;
  memcpy(n->u.k.grid, grid, sizeof n->u.k.grid);
  memcpy(n->u.k.block, block, sizeof n->u.k.block);
  n->u.k.shmem = shmem;
  n->u.k.bytes = bytes;
  for (unsigned i = 0; i < def->nparams; i++) {
    memcpy(bytes + def->offset[i], args[i], def->size[i]);
    n->u.k.args[i] = bytes + def->offset[i];
  }
  return CUDA_SUCCESS;
}

void cg_node_clear(struct cg_node *n)
{
  if (n->kind == CG_NODE_KERNEL) free(n->u.k.bytes);
  n->magic = CG_DEAD;
}

void cg_node_run(const struct cg_node *n)
{
  switch (n->kind) {
  case CG_NODE_KERNEL: {
    struct cg_shape shape = { .shmem = n->u.k.shmem };
    memcpy(shape.grid, n->u.k.grid, sizeof shape.grid);
    memcpy(shape.block, n->u.k.block, sizeof shape.block);
    run_kernel(n->u.k.def, n->u.k.args, &shape);
    break;
  }
  case CG_NODE_MEMSET:
    for (size_t row = 0; row < n->u.set.height; row++)
      cg_memset(n->u.set.dst + row * n->u.set.pitch, n->u.set.value, n->u.set.elem, n->u.set.width);
    atomic_fetch_add_explicit(&cg_count.memops_run, 1, memory_order_relaxed);
    break;
  case CG_NODE_MEMCPY:
    memmove((void *)n->u.cpy.dst, (const void *)n->u.cpy.src, n->u.cpy.bytes);
    atomic_fetch_add_explicit(&cg_count.memops_run, 1, memory_order_relaxed);
    break;
  case CG_NODE_HOST:
    n->u.host.fn(n->u.host.data);
    break;
  }
  atomic_fetch_add_explicit(&cg_count.graph_nodes_run, 1, memory_order_relaxed);
}

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3],
                       unsigned shmem, CUstream hStream, void **params, void **extra,
                       const CUlaunchAttribute *attrs, unsigned nattrs)
{
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  const struct cg_kernel_def *def = cg_launch_def(f);
  struct cg_stream *s = cg_stream_get(hStream);
  if (!def || !s) return CUDA_ERROR_INVALID_HANDLE;
  if (nattrs && !attrs) return CUDA_ERROR_INVALID_VALUE;
  struct cg_shape shape = { .shmem = shmem };
  memcpy(shape.grid, grid, sizeof shape.grid);
  memcpy(shape.block, block, sizeof shape.block);
  if ((r = cg_shape_check(f, &shape, attrs, nattrs)) != CUDA_SUCCESS) return r;
  if (cg_capturing(s)) {
    struct cg_node n;
    if ((r = cg_node_set_kernel(&n, f, grid, block, shmem, params, extra)) != CUDA_SUCCESS)
      return r;
    n.u.k.nattrs = nattrs < 4 ? nattrs : 4;
    if (nattrs) memcpy(n.u.k.attrs, attrs, n.u.k.nattrs * sizeof *attrs);
    if ((r = cg_capture_node(s, &n)) != CUDA_SUCCESS) cg_node_clear(&n);
    return r;
  }
  void *args[CG_MAX_PARAMS];
  if ((r = gather(def, params, extra, args)) != CUDA_SUCCESS) return r;
  atomic_fetch_add_explicit(&cg_count.launch_eager, 1, memory_order_relaxed);
  run_kernel(def, args, &shape);
  cg_gpu_run(s, 1, false);
  return CUDA_SUCCESS;
}

#define DIMS(x, y, z) ((const unsigned[3]){ x, y, z })

CG_TWINS(cuLaunchKernel,
          (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
           unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
           unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra),
          launch(f, DIMS(gridDimX, gridDimY, gridDimZ), DIMS(blockDimX, blockDimY, blockDimZ),
                sharedMemBytes, hStream, kernelParams, extra, NULL, 0))

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, DIMS(c->gridDimX, c->gridDimY, c->gridDimZ),
                DIMS(c->blockDimX, c->blockDimY, c->blockDimZ), c->sharedMemBytes, c->hStream,
                params, extra, c->attrs, c->numAttrs);
}

CG_TWINS(cuLaunchKernelEx,
          (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),
          launch_ex(config, f, kernelParams, extra))

static CUresult host_func(CUstream hStream, CUhostFn fn, void *userData)
{
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  if (cg_capturing(s)) { /* a host node, run in order at every launch of the graph */
    struct cg_node n = { .magic = CG_NODE, .kind = CG_NODE_HOST, .u.host = { fn, userData } };
    return cg_capture_node(s, &n);
  }
  fn(userData);
  return CUDA_SUCCESS;
}

CG_TWINS(cuLaunchHostFunc, (CUstream hStream, CUhostFn fn, void *userData),
          host_func(hStream, fn, userData))
