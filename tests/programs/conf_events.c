/* conf_events: cross-stream ordering through events. Stream A (blocking) produces a buffer,
 * records an event; non-blocking stream B waits on it and consumes A's buffer, then sets a
 * host-mapped flag the host reads after polling cuEventQuery (no sync). A also marks progress at
 * a position that moves each iteration, read the same way. A shim that defers work past an
 * event record, or B's work ahead of A's, changes the result. Prints `checksum <hex>`.
 * usage: conf_events [--iters N] */
#include "prog.h"
#include <stdio.h>

enum { N = 1024 };

int main(int argc, char **argv)
{
  int iters = prog_iters(argc, argv, 40);
  prog_init();
  CUmodule mod = prog_module();
  CUfunction chain = prog_fn(mod, "cg_chain"), mix = prog_fn(mod, "cg_step_mix"),
             scale = prog_fn(mod, "cg_scale_f32"), axpy = prog_fn(mod, "cg_axpy_f32"),
             flag = prog_fn(mod, "cg_set_flag");
  CUstream a, b;
  CK(cuStreamCreate(&a, CU_STREAM_DEFAULT));
  CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent produced, mid, t0, t1;
  CK(cuEventCreate(&produced, CU_EVENT_DISABLE_TIMING));
  CK(cuEventCreate(&mid, CU_EVENT_DISABLE_TIMING));
  CK(cuEventCreate(&t0, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&t1, CU_EVENT_DEFAULT));
  CUdeviceptr xa, xb, acc_a, acc_b, dflag, dflag_a;
  CK(cuMemAlloc(&xa, N * sizeof(float)));
  CK(cuMemAlloc(&xb, N * sizeof(float)));
  CK(cuMemAlloc(&acc_a, 8));
  CK(cuMemAlloc(&acc_b, 8));
  CK(cuMemsetD32(xa, 0, N));
  CK(cuMemsetD32(xb, 0, N));
  CK(cuMemsetD8(acc_a, 0, 8));
  CK(cuMemsetD8(acc_b, 0, 8));
  volatile int *host_flag;
  CK(cuMemHostAlloc((void **)&host_flag, sizeof *host_flag, CU_MEMHOSTALLOC_DEVICEMAP));
  CK(cuMemHostGetDevicePointer(&dflag, (void *)host_flag, 0));
  *host_flag = -1;
  volatile int *host_flag_a;
  CK(cuMemHostAlloc((void **)&host_flag_a, sizeof *host_flag_a, CU_MEMHOSTALLOC_DEVICEMAP));
  CK(cuMemHostGetDevicePointer(&dflag_a, (void *)host_flag_a, 0));
  *host_flag_a = -1;

  unsigned long long h = 14695981039346656037ULL;
  int n = N;
  for (int it = 0; it < iters; it++) {
    unsigned long long step = (unsigned long long)it, tag = (unsigned long long)it << 4;
    float shrink = 0.999f, half = 0.5f, decay = 0.75f;
    int mark = 1000 + it;
    CUresult q;
    void *mix_p[] = { &xa, &n, &step }, *scale_a[] = { &xa, &shrink, &n },
         *chain_a[] = { &acc_a, &tag }, *chain_b[] = { &acc_b, &tag },
         *axpy_p[] = { &xb, &xa, &half, &n }, *scale_b[] = { &xb, &decay, &n },
         *flag_p[] = { &dflag, &mark };

    CK(cuEventRecord(t0, a));
    prog_launch(mix, N, a, mix_p);
    prog_launch(scale, N, a, scale_a);
    for (int k = 0; k < 4; k++, tag++) {
      prog_launch(chain, 0, a, chain_a);
      if (k == it % 5) {  /* a progress marker at a moving position, seen through an event */
        int progress = it * 8 + k;
        void *progress_p[] = { &dflag_a, &progress };
        prog_launch(flag, 0, a, progress_p);
        CK(cuEventRecord(mid, a));
        while ((q = cuEventQuery(mid)) == CUDA_ERROR_NOT_READY) {}
        CK(q);
        h = prog_mix(h, (unsigned long long)*host_flag_a);
      }
    }
    CK(cuEventRecord(produced, a));

    CK(cuStreamWaitEvent(b, produced, 0));
    prog_launch(axpy, N, b, axpy_p);   /* reads A's xa: only the event orders it */
    prog_launch(scale, N, b, scale_b);
    for (int k = 0; k < 4; k++, tag++) prog_launch(chain, 0, b, chain_b);
    prog_launch(flag, 0, b, flag_p);
    CK(cuEventRecord(t1, b));

    /* The host learns B is done only from the event; the flag must be there already. */
    while ((q = cuEventQuery(t1)) == CUDA_ERROR_NOT_READY) {}
    CK(q);
    h = prog_mix(h, (unsigned long long)*host_flag);
    float ms = -1.f;
    CK(cuEventElapsedTime(&ms, t0, t1));
    if (!(ms >= 0.f)) { fprintf(stderr, "elapsed time %f < 0\n", (double)ms); return 1; }
    CK(cuStreamSynchronize(a));
  }
  h = prog_mix_device(h, acc_a, 8);
  h = prog_mix_device(h, acc_b, 8);
  h = prog_mix_device(h, xa, N * sizeof(float));
  h = prog_mix_device(h, xb, N * sizeof(float));
  printf("checksum %016llx\n", h);
  return 0;
}
