/* syncloop: a training-loop shape with several host syncs per iteration, for `cugraft profile`:
 * set-up (allocations, synchronous memsets), then per iteration an input upload and K stages,
 * stage k launching k + 3 chained kernels and ending with a stream sync, the last one reading
 * the "loss" back; a logging read every 10 iterations; then read-backs and frees. Prints
 * `checksum <hex>` and `launches per iteration <n>` (what the profile must find). --nosync: a
 * loop with no boundary at all (10 launches per iteration), every result read after it, as a
 * PyTorch loop that keeps its losses on the GPU does. --graph: torch.compile's reduce-overhead
 * shape: a compile phase that benchmarks a kernel (3 configs of 1000 launches, an event
 * recorded after each, a sync after each config), a graph captured from 40 kernels, then per
 * iteration one kernel, the graph's launch and a loss read (an async copy and a sync).
 * --init-only: a context made, nothing else (as PyTorch's compile workers do). --host-us N: N
 * microseconds of host work after each sync of the main loop (the program's own work between
 * waits, which no launch-side tool removes).
 * usage: syncloop [--iters N] [--syncs K] [--nosync] [--graph] [--init-only] [--host-us N] */
#include "prog.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Host work: spins us microseconds. */
static void host_work(long us)
{
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do clock_gettime(CLOCK_MONOTONIC, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

int main(int argc, char **argv)
{
  int iters = prog_iters(argc, argv, 40);
  const char *syncs_opt = prog_opt(argc, argv, "--syncs"), *host_opt = prog_opt(argc, argv, "--host-us");
  int syncs = syncs_opt ? atoi(syncs_opt) : 5;
  long host_us = host_opt ? atol(host_opt) : 0;
  prog_init();
  if (prog_flag(argc, argv, "--init-only")) {  /* as a compile worker: CUDA looked up, no work */
    void *fn;
    CK(cuGetProcAddress("cuCtxSynchronize", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
    return 0;
  }
  CUmodule mod = prog_module();
  CUfunction chain = prog_fn(mod, "cg_chain");
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr acc, input, bufs[4];
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemAlloc(&input, 8));
  for (int i = 0; i < 4; i++) {
    CK(cuMemAlloc(&bufs[i], 256));
    CK(cuMemsetD32(bufs[i], 0, 64));
  }
  CK(cuMemsetD8(acc, 0, 8));

  unsigned long long h = 14695981039346656037ULL, tag = 0, per_iter = 0;
  if (prog_flag(argc, argv, "--nosync")) {
    for (int it = 0; it < iters; it++)
      for (per_iter = 0; per_iter < 10; per_iter++) {
        tag++;
        void *p[] = { &acc, &tag };
        prog_launch(chain, 0, s, p);
      }
    for (int it = 0; it < iters; it++) {  /* the losses, read after the loop */
      unsigned long long loss;
      CK(cuMemcpyDtoH(&loss, acc, sizeof loss));
      h = prog_mix(h, loss);
    }
    iters = 0;
  }
  if (prog_flag(argc, argv, "--graph")) {
    CUevent ev;
    CK(cuEventCreate(&ev, CU_EVENT_DEFAULT));
    for (int config = 0; config < 3; config++) {
      for (int rep = 0; rep < 1000; rep++) {
        tag++;
        void *p[] = { &bufs[1], &tag };
        prog_launch(chain, 0, s, p);
        CK(cuEventRecord(ev, s));
      }
      CK(cuStreamSynchronize(s));
    }
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int k = 0; k < 40; k++) {
      unsigned long long t = 1000000 + (unsigned long long)k;
      void *p[] = { &acc, &t };
      prog_launch(chain, 0, s, p);
    }
    CUgraph g;
    CUgraphExec exec;
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiateWithFlags(&exec, g, 0));
    for (int it = 0; it < iters; it++) {
      tag++;
      void *p[] = { &acc, &tag };
      prog_launch(chain, 0, s, p);
      CK(cuGraphLaunch(exec, s));
      unsigned long long loss;
      CK(cuMemcpyDtoHAsync(&loss, acc, sizeof loss, s));
      CK(cuStreamSynchronize(s));
      h = prog_mix(h, loss);
    }
    per_iter = 41;
    CK(cuGraphExecDestroy(exec));
    CK(cuGraphDestroy(g));
    iters = 0;
  }
  for (int it = 0; it < iters; it++) {
    unsigned long long in = (unsigned long long)it * 7 + 1;
    CK(cuMemcpyHtoDAsync(input, &in, sizeof in, s));
    per_iter = 0;
    for (int k = 0; k < syncs; k++) {
      for (int l = 0; l < k + 3; l++, per_iter++) {
        tag++;
        void *p[] = { &acc, &tag };
        prog_launch(chain, 0, s, p);
      }
      CK(cuStreamSynchronize(s));
      if (host_us > 0)
        host_work(host_us);
    }
    unsigned long long loss;
    CK(cuMemcpyDtoH(&loss, acc, sizeof loss));
    h = prog_mix(h, loss);
    if (it % 10 == 9) {  /* logging, every 10 steps */
      unsigned long long x;
      CK(cuMemcpyDtoH(&x, input, sizeof x));
      h = prog_mix(h, x);
    }
  }
  for (int i = 0; i < 4; i++) {
    h = prog_mix_device(h, bufs[i], 256);
    CK(cuMemFree(bufs[i]));
  }
  printf("checksum %016llx\nlaunches per iteration %llu\n", h, per_iter);
  return 0;
}
