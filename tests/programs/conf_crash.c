/* conf_crash: 20 iterations (replayed under a shim) with a flushed `checksum <hex>` line every 5,
 * then launches with no sync and abort(), so no exit handler runs. Must end by SIGABRT (status
 * 134) with the same checksum lines with or without a shim: a shim that hangs, exits cleanly,
 * crashes in its own handlers or changed earlier results fails. usage: conf_crash */
#include "prog.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

enum { N = 1024, ITERS = 20 };

int main(void)
{
  /* No core file: the exit status is what is tested. */
  struct rlimit no_core = { 0, 0 };
  if (setrlimit(RLIMIT_CORE, &no_core) != 0) perror("setrlimit(RLIMIT_CORE)");
  prog_init();
  CUmodule mod = prog_module();
  CUfunction chain = prog_fn(mod, "cg_chain"), mix = prog_fn(mod, "cg_step_mix"),
             scale = prog_fn(mod, "cg_scale_f32"), axpy = prog_fn(mod, "cg_axpy_f32");
  CUstream s;
  CUdeviceptr x, y, acc;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&x, N * sizeof(float)));
  CK(cuMemAlloc(&y, N * sizeof(float)));
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemsetD32(x, 0, N));
  CK(cuMemsetD32(y, 0, N));
  CK(cuMemsetD8(acc, 0, 8));

  unsigned long long h = 14695981039346656037ULL;
  int n = N;
  float half = 0.5f, quarter = 0.25f;
  for (int it = 0; it <= ITERS; it++) {
    unsigned long long st = (unsigned long long)it, tag = (unsigned long long)it << 4;
    void *mix_p[] = { &x, &n, &st }, *scale_p[] = { &x, &half, &n },
         *axpy_p[] = { &y, &x, &quarter, &n }, *chain_p[] = { &acc, &tag };
    prog_launch(mix, N, s, mix_p);
    prog_launch(scale, N, s, scale_p);
    for (int i = 0; i < 3; i++, tag++) prog_launch(chain, 0, s, chain_p);
    if (it == ITERS) { /* iteration 21: half of it in flight */
      fprintf(stderr, "conf_crash: aborting on purpose\n");
      abort();
    }
    prog_launch(axpy, N, s, axpy_p);
    prog_launch(mix, N, s, mix_p);
    for (int i = 0; i < 3; i++, tag++) prog_launch(chain, 0, s, chain_p);
    CK(cuStreamSynchronize(s)); /* a sync per iteration: the loop is replayed long before the end */
    h = prog_mix_device(h, acc, 8);
    if (it % 5 == 4) {
      h = prog_mix_device(h, y, N * sizeof(float));
      printf("checksum %016llx\n", h);
      fflush(stdout);
    }
  }
  return 0; /* not reached */
}
