/* conf_grow: launch shapes that change every iteration, as in a decoding loop. Each token runs
 * fixed-shape kernels around one cg_grid_sum whose shape moves: its grid grows by one block per
 * token (a growing concatenation; the default), or its block dimensions and dynamic shared
 * memory (up to 60 KiB, allowed by the function attribute) change every token (--block), or its
 * grid grows by one cluster per token in a cluster-dimension launch (--cluster). A token ends
 * with a read of the result, as `.item()` would. cg_grid_sum sums what its shape covers, so a
 * replay running a launch with any other shape changes the checksum; so does a refused shape
 * (mid-loop) reported as a success.
 * Prints `checksum <hex>`. usage: conf_grow [--iters N] [--block | --cluster] */
#include "prog.h"
#include <stdio.h>
#include <stdlib.h>

enum { N = 1024, BLOCK = 64, CLUSTER = 2 };

struct k { CUfunction chain, mix, scale, sum; CUstream s; CUdeviceptr x, acc, out, in; };

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
  } else if (mode == 'c') {
    CUlaunchAttribute cluster = { .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION };
    cluster.value.clusterDim.x = CLUSTER;
    cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
    CUlaunchConfig c = { .gridDimX = CLUSTER * (1 + t), .gridDimY = 1, .gridDimZ = 1,
                         .blockDimX = BLOCK, .blockDimY = 1, .blockDimZ = 1, .hStream = k->s,
                         .attrs = &cluster, .numAttrs = 1 };
    CK(cuLaunchKernelEx(&c, k->sum, sum_p, NULL));
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
  int mode = prog_flag(argc, argv, "--block") ? 'b' : prog_flag(argc, argv, "--cluster") ? 'c' : 0;
  prog_init();
  CUmodule mod = prog_module();
  struct k k = { .chain = prog_fn(mod, "cg_chain"), .mix = prog_fn(mod, "cg_step_mix"),
                 .scale = prog_fn(mod, "cg_scale_f32"), .sum = prog_fn(mod, "cg_grid_sum") };
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
  CK(cuMemsetD32(k.x, 0, N));
  CK(cuMemsetD8(k.acc, 0, 8));
  CK(cuMemsetD8(k.out, 0, 8));

  unsigned long long h = 14695981039346656037ULL;
  for (int t = 0; t < iters; t++) {
    CUresult refused = token(&k, t, mode, t == iters / 2);
    if (t == iters / 2) {
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
