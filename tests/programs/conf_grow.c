/* conf_grow: launch shapes that change every iteration, as in a decoding loop. Each token runs
 * fixed-shape kernels around one cg_grid_sum whose shape moves: its grid grows by one block per
 * token (a growing concatenation; the default), or its block dimensions and dynamic shared
 * memory (up to 60 KiB, allowed by the function attribute) change every token (--block), or its
 * grid grows by one cluster per token in a cluster-dimension launch (--cluster). A token ends
 * with a read of the result, as `.item()` would. cg_grid_sum sums what its shape covers, so a
 * replay running a launch with any other shape changes the checksum; so does a refused shape
 * (mid-loop) reported as a success.
 * --limit: shapes that only this function refuses. cg_grid_sum allows 512 threads per block
 * (its launch bounds) and 48 KiB of dynamic shared memory unless its attribute says more. Once
 * replayed, a token asks for 1024 threads, another for 56 KiB; then the attribute is raised to
 * 64 KiB and 56 KiB runs for a while (replayed, the shape patched), then lowered to 48 KiB
 * while 56 KiB is still asked for. Every launch's result is printed (`limit <token> <result>`
 * where not CUDA_SUCCESS) and mixed into the checksum: the same calls must fail as without a
 * shim, and a refused launch must not run. --kernel: the same through a CUkernel handle,
 * cuLaunchKernelEx and cuKernelSetAttribute. --copy: the default token, summing a device copy
 * that grows by one block's elements every token (a sequence copied whole as it grows), so
 * that a replay copying another size than the one asked for changes the checksum. --memset:
 * the default token, summing a buffer that a memset fills with the token's value over one
 * block's elements more every token (a growing output zeroed before a split-K GEMM adds into
 * it), and one block past it, so that a replay setting another width changes the checksum.
 * Prints `checksum <hex>`.
 * usage: conf_grow [--iters N] [--block | --cluster | --limit [--kernel] | --copy | --memset] */
#include "prog.h"
#include <stdio.h>
#include <stdlib.h>

enum { N = 1024, BLOCK = 64, CLUSTER = 2 };

struct k {
  CUfunction chain, mix, scale, sum;
  CUkernel ksum;  /* --limit --kernel: cg_grid_sum as a CUkernel */
  int iters;
  CUstream s;
  CUdeviceptr x, acc, out, in, cat;
};

enum { ATTR_RAISED = 64 << 10, ATTR_LOWERED = 48 << 10, BIG_SHMEM = 56 << 10 };

static CUresult set_shmem_limit(const struct k *k, int bytes)
{
  if (k->ksum)
    return cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes, k->ksum, 0);
  return cuFuncSetAttribute(k->sum, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

/* cg_grid_sum of a --limit token: its result, not checked (some are refused on purpose). */
static CUresult limit_sum(const struct k *k, int t, void **sum_p)
{
  int n = k->iters, raise = n * 2 / 5, lower = n * 3 / 5;
  unsigned bx = 64, by = 1, shmem = 16u << 10;
  if (t == n / 5)
    by = 16; /* 1024 threads: more than its 512 */
  if (t == n * 3 / 10 || (t >= raise && t < lower + n / 20))
    shmem = BIG_SHMEM; /* refused, then allowed, then refused again */
  if (t == raise)
    CK(set_shmem_limit(k, ATTR_RAISED));
  if (t == lower)
    CK(set_shmem_limit(k, ATTR_LOWERED));
  CUlaunchConfig c = { .gridDimX = 2, .gridDimY = 1, .gridDimZ = 1, .blockDimX = bx,
                       .blockDimY = by, .blockDimZ = 1, .sharedMemBytes = shmem, .hStream = k->s };
  if (k->ksum)
    return cuLaunchKernelEx(&c, (CUfunction)k->ksum, sum_p, NULL);
  return cuLaunchKernel(k->sum, c.gridDimX, 1, 1, bx, by, 1, shmem, k->s, sum_p, NULL);
}

/* Once, mid-loop, the program first tries a shape the driver refuses (grid 0; in clusters, a
 * grid that is no multiple of the cluster): it must get the error, as without a shim, and not a
 * success for a launch deferred into a graph. Returns that launch's result (else 0). */
static CUresult token(const struct k *k, int t, int mode, int refused)
{
  CUresult r = CUDA_SUCCESS;
  unsigned long long st = (unsigned long long)t, tag = (unsigned long long)t << 4;
  float half = 0.5f;
  int n = N;
  void *mix_p[] = { (void *)&k->x, &n, &st }, *scale_p[] = { (void *)&k->x, &half, &n },
       *chain_p[] = { (void *)&k->acc, &tag }, *sum_p[] = { (void *)&k->out, (void *)&k->in };
  prog_launch(k->mix, n, k->s, mix_p);
  prog_launch(k->chain, 0, k->s, chain_p);
  if (refused && mode == 'c') {
    CUlaunchAttribute cluster = { .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION };
    cluster.value.clusterDim.x = CLUSTER;
    cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
    CUlaunchConfig c = { .gridDimX = CLUSTER * (1 + t) + 1, .gridDimY = 1, .gridDimZ = 1,
                         .blockDimX = BLOCK, .blockDimY = 1, .blockDimZ = 1, .hStream = k->s,
                         .attrs = &cluster, .numAttrs = 1 };
    r = cuLaunchKernelEx(&c, k->sum, sum_p, NULL);
  } else if (refused) {
    r = cuLaunchKernel(k->sum, 0, 1, 1, BLOCK, 1, 1, 0, k->s, sum_p, NULL);
  }
  if (mode == 'b') {
    unsigned bx = 32u << (t % 3), by = 1 + t % 4, shmem = (unsigned)(t % 4) * (20u << 10);
    CK(cuLaunchKernel(k->sum, 2 + t % 5, 1, 1, bx, by, 1, shmem, k->s, sum_p, NULL));
  } else if (mode == 'l') {
    r = limit_sum(k, t, sum_p);
  } else if (mode == 'c') {
    CUlaunchAttribute cluster = { .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION };
    cluster.value.clusterDim.x = CLUSTER;
    cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
    CUlaunchConfig c = { .gridDimX = CLUSTER * (1 + t), .gridDimY = 1, .gridDimZ = 1,
                         .blockDimX = BLOCK, .blockDimY = 1, .blockDimZ = 1, .hStream = k->s,
                         .attrs = &cluster, .numAttrs = 1 };
    CK(cuLaunchKernelEx(&c, k->sum, sum_p, NULL));
  } else if (mode == 'y') {
    void *cat_p[] = { (void *)&k->out, (void *)&k->cat };
    CK(cuMemcpyDtoDAsync(k->cat, k->in, (size_t)(1 + t) * BLOCK * sizeof(unsigned), k->s));
    CK(cuLaunchKernel(k->sum, 1 + t, 1, 1, BLOCK, 1, 1, 0, k->s, cat_p, NULL));
  } else if (mode == 'm') {
    void *cat_p[] = { (void *)&k->out, (void *)&k->cat };
    unsigned v = (unsigned)t * 2654435761u ^ 0x5bd1e995u;
    CK(cuMemsetD32Async(k->cat, v, (size_t)(1 + t) * BLOCK, k->s));
    CK(cuLaunchKernel(k->sum, 2 + t, 1, 1, BLOCK, 1, 1, 0, k->s, cat_p, NULL));
  } else {
    CK(cuLaunchKernel(k->sum, 1 + t, 1, 1, BLOCK, 1, 1, 0, k->s, sum_p, NULL));
  }
  prog_launch(k->scale, n, k->s, scale_p);
  tag++;
  prog_launch(k->chain, 0, k->s, chain_p);
  return r;
}

int main(int argc, char **argv)
{
  int iters = prog_iters(argc, argv, 200);
  int mode = prog_flag(argc, argv, "--block") ? 'b' : prog_flag(argc, argv, "--cluster") ? 'c'
           : prog_flag(argc, argv, "--limit") ? 'l' : prog_flag(argc, argv, "--copy") ? 'y'
           : prog_flag(argc, argv, "--memset") ? 'm' : 0;
  prog_init();
  CUmodule mod = prog_module();
  struct k k = { .chain = prog_fn(mod, "cg_chain"), .mix = prog_fn(mod, "cg_step_mix"),
                 .scale = prog_fn(mod, "cg_scale_f32"), .sum = prog_fn(mod, "cg_grid_sum"),
                 .iters = iters };
  if (mode == 'l' && prog_flag(argc, argv, "--kernel")) {
    CUlibrary lib;
    CK(cuLibraryLoadData(&lib, kernels_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetKernel(&k.ksum, lib, "cg_grid_sum"));
  }
  if (mode == 'b')
    CK(cuFuncSetAttribute(k.sum, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 60 << 10));
  /* threads of the largest launch: (1 + iters) clusters of blocks, or 6 blocks of 512 */
  size_t threads = (size_t)CLUSTER * BLOCK * (size_t)(iters + 1) + 6 * 512;
  unsigned *in = malloc(threads * sizeof *in);
  if (!in) { fprintf(stderr, "out of host memory\n"); return 1; }
  for (size_t i = 0; i < threads; i++) in[i] = (unsigned)(i * 2654435761u >> 7);
  CK(cuStreamCreate(&k.s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&k.x, N * sizeof(float)));
  CK(cuMemAlloc(&k.acc, 8));
  CK(cuMemAlloc(&k.out, 8));
  CK(cuMemAlloc(&k.in, threads * sizeof *in));
  CK(cuMemcpyHtoD(k.in, in, threads * sizeof *in));
  CK(cuMemAlloc(&k.cat, threads * sizeof *in));
  CK(cuMemsetD32(k.cat, 0, threads));
  CK(cuMemsetD32(k.x, 0, N));
  CK(cuMemsetD8(k.acc, 0, 8));
  CK(cuMemsetD8(k.out, 0, 8));

  unsigned long long h = 14695981039346656037ULL;
  for (int t = 0; t < iters; t++) {
    CUresult refused = token(&k, t, mode, mode != 'l' && t == iters / 2);
    if (mode == 'l') {
      if (refused != CUDA_SUCCESS)
        printf("limit %d %d\n", t, (int)refused);
      h = prog_mix(h, (unsigned long long)refused);
    } else if (t == iters / 2) {
      printf("refused %d\n", (int)refused);
      h = prog_mix(h, (unsigned long long)refused);
    }
    unsigned long long out;
    CK(cuStreamSynchronize(k.s));
    CK(cuMemcpyDtoH(&out, k.out, sizeof out));
    h = prog_mix(h, out);
  }
  h = prog_mix_device(h, k.acc, 8);
  h = prog_mix_device(h, k.x, N * sizeof(float));
  printf("checksum %016llx\n", h);
  free(in);
  return 0;
}
