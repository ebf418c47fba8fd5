/* conf_uploads: a data loader and a loss read. Each iteration uploads new input from pageable
 * memory (overwritten as soon as the call returns, which the driver allows: it has staged the
 * bytes) and from pinned memory, runs kernels on both, and copies a result into pinned memory
 * read after cuStreamSynchronize; every 4th step it also copies an intermediate mid-step. A shim
 * that defers the pageable copy, reorders a copy against the kernels, or lets a read see stale
 * memory changes the checksum. Prints `checksum <hex>`.
 * usage: conf_uploads [--iters N] */
#include "prog.h"
#include <stdio.h>
#include <stdlib.h>

enum { N = 1024, LOSS = 4 };

int main(int argc, char **argv)
{
  int iters = prog_iters(argc, argv, 40);
  prog_init();
  CUmodule mod = prog_module();
  CUfunction mix = prog_fn(mod, "cg_step_mix"), scale = prog_fn(mod, "cg_scale_f32"),
             axpy = prog_fn(mod, "cg_axpy_f32");
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr w, in_pageable, in_pinned;
  CUdeviceptr *bufs[] = { &w, &in_pageable, &in_pinned };
  for (unsigned i = 0; i < 3; i++) {
    CK(cuMemAlloc(bufs[i], N * sizeof(float)));
    CK(cuMemsetD32(*bufs[i], 0, N));
  }
  float *pageable = malloc(N * sizeof(float)), *pinned, *loss, *metric;
  if (!pageable) return 1;
  CK(cuMemAllocHost((void **)&pinned, N * sizeof(float)));
  CK(cuMemAllocHost((void **)&loss, LOSS * sizeof(float)));
  CK(cuMemAllocHost((void **)&metric, LOSS * sizeof(float)));

  unsigned long long h = 14695981039346656037ULL;
  int n = N;
  for (int it = 0; it < iters; it++) {
    unsigned long long step = (unsigned long long)it;
    float lr = -0.125f, mom = 0.5f, shrink = 0.99f;
    void *mix_p[] = { &w, &n, &step }, *pageable_p[] = { &w, &in_pageable, &lr, &n },
         *pinned_p[] = { &w, &in_pinned, &mom, &n }, *scale_p[] = { &w, &shrink, &n };

    for (int i = 0; i < N; i++) pageable[i] = (float)((it * 37 + i) % 101) / 16.f;
    CK(cuMemcpyHtoDAsync(in_pageable, pageable, N * sizeof(float), s));
    for (int i = 0; i < N; i++) pageable[i] = -1e9f;  /* allowed: the copy has been staged */
    for (int i = 0; i < N; i++) pinned[i] = (float)((it * 11 + i * 3) % 53) / 8.f;
    CK(cuMemcpyHtoDAsync(in_pinned, pinned, N * sizeof(float), s));

    prog_launch(mix, N, s, mix_p);
    prog_launch(axpy, N, s, pageable_p);
    prog_launch(axpy, N, s, pinned_p);
    if (it % 4 == 3)  /* a metric read every 4th step, mid-step: w is overwritten right after */
      CK(cuMemcpyDtoHAsync(metric, w, LOSS * sizeof(float), s));
    prog_launch(scale, N, s, scale_p);
    prog_launch(mix, N, s, mix_p);
    prog_launch(scale, N, s, scale_p);
    CK(cuMemcpyDtoHAsync(loss, w + (CUdeviceptr)(it % (N / LOSS)) * LOSS * sizeof(float),
                         LOSS * sizeof(float), s));
    CK(cuStreamSynchronize(s));
    h = prog_mix_bytes(h, loss, LOSS * sizeof(float));
    if (it % 4 == 3) h = prog_mix_bytes(h, metric, LOSS * sizeof(float));
  }
  h = prog_mix_device(h, w, N * sizeof(float));
  printf("checksum %016llx\n", h);
  return 0;
}
