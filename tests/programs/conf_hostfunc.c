/* conf_hostfunc: a host function in the middle of each iteration reads a host-mapped counter
 * that the kernel launched just before it writes, and the kernel just after it overwrites: the
 * recorded sequence is in the checksum, so running the host function early (before deferred
 * work) or late (after later work) changes it. Prints `checksum <hex>`.
 * usage: conf_hostfunc [--iters N] */
#include "prog.h"
#include <stdio.h>
#include <stdlib.h>

enum { N = 1024 };

/* What the host function saw, one entry per iteration; it must not call the driver. */
struct seen { volatile int *counter; int *values; int n; };

static void CUDA_CB record(void *user)
{
  struct seen *s = user;
  s->values[s->n++] = *s->counter;
}

int main(int argc, char **argv)
{
  int iters = prog_iters(argc, argv, 40);
  prog_init();
  CUmodule mod = prog_module();
  CUfunction chain = prog_fn(mod, "cg_chain"), mix = prog_fn(mod, "cg_step_mix"),
             scale = prog_fn(mod, "cg_scale_f32"), flag = prog_fn(mod, "cg_set_flag");
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x, acc, dcounter;
  CK(cuMemAlloc(&x, N * sizeof(float)));
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemsetD32(x, 0, N));
  CK(cuMemsetD8(acc, 0, 8));
  volatile int *counter;
  CK(cuMemHostAlloc((void **)&counter, sizeof *counter, CU_MEMHOSTALLOC_DEVICEMAP));
  CK(cuMemHostGetDevicePointer(&dcounter, (void *)counter, 0));
  *counter = -1;
  struct seen seen = { counter, calloc((size_t)iters, sizeof(int)), 0 };
  if (!seen.values) return 1;

  int n = N;
  for (int it = 0; it < iters; it++) {
    unsigned long long step = (unsigned long long)it, tag = (unsigned long long)it << 4;
    float shrink = 0.999f;
    int before = 2 * it + 1, after = 2 * it + 2;
    void *mix_p[] = { &x, &n, &step }, *scale_p[] = { &x, &shrink, &n },
         *chain_p[] = { &acc, &tag }, *before_p[] = { &dcounter, &before },
         *after_p[] = { &dcounter, &after };

    prog_launch(mix, N, s, mix_p);
    for (int k = 0; k < 4; k++, tag++) prog_launch(chain, 0, s, chain_p);
    prog_launch(flag, 0, s, before_p);
    CK(cuLaunchHostFunc(s, record, &seen));
    prog_launch(flag, 0, s, after_p);
    prog_launch(scale, N, s, scale_p);
    for (int k = 0; k < 4; k++, tag++) prog_launch(chain, 0, s, chain_p);
    CK(cuStreamSynchronize(s));
  }
  unsigned long long h = 14695981039346656037ULL;
  if (seen.n != iters) { fprintf(stderr, "host function ran %d times, want %d\n", seen.n, iters); return 1; }
  for (int it = 0; it < iters; it++)
    if (seen.values[it] != 2 * it + 1) {
      fprintf(stderr, "iteration %d: host function saw %d, want %d\n", it, seen.values[it], 2 * it + 1);
      return 1;
    }
  h = prog_mix_bytes(h, seen.values, (size_t)iters * sizeof(int));
  h = prog_mix(h, (unsigned long long)*counter);
  h = prog_mix_device(h, acc, 8);
  h = prog_mix_device(h, x, N * sizeof(float));
  printf("checksum %016llx\n", h);
  return 0;
}
