/* conf_edges: the contract at its edges, one hazard per mode; a shim must change no line of what
 * it prints.
 *   --mode memop --bad KIND [--at N]: chained kernels, a stream-ordered memset or device copy, more
 *     kernels and a sync per iteration; from iteration N (default 35) the memop is one the driver
 *     refuses: KIND misaligned (a 32-bit memset 2 bytes off), past-end (a memset past the end of
 *     its allocation), freed-src (a copy from a freed buffer), copy-past-end (a copy past the end
 *     of its destination). Prints every failing call's code (`rc ITER CALL CODE`), the final
 *     cuCtxSynchronize's, and a checksum of the buffers.
 *   --mode order [--grid G]: a producer kernel on non-blocking stream 1 sets a flag that a consumer
 *     on stream 2 (G blocks, each spinning until the flag is set) waits for, then a context sync:
 *     submitted in the program's order the producer runs first; reordered, the consumer holds
 *     the device and the program hangs.
 *   --mode blocking: a kernel writes host-mapped memory that the host reads right after the
 *     launch, with no sync: prints how many reads saw an older value (`stale N`). With
 *     CUDA_LAUNCH_BLOCKING=1 every launch has completed when it returns.
 * usage: conf_edges --mode MODE [--iters N] ... */
#include "prog.h"
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 1024 };

static unsigned long long h = 14695981039346656037ULL;

static void chain3(CUfunction chain, CUdeviceptr *acc, unsigned long long *tag, CUstream s)
{
  for (int k = 0; k < 3; k++, (*tag)++) {
    void *p[] = { acc, tag };
    prog_launch(chain, 0, s, p);
  }
}

/* A failing call's code is part of the output, as the program would see it. */
static void note_rc(int it, const char *call, CUresult r)
{
  h = prog_mix(h, (unsigned long long)r);
  if (r != CUDA_SUCCESS) printf("rc %d %s %d\n", it, call, (int)r);
}

static int memop(int argc, char **argv, CUfunction chain)
{
  const char *bad = prog_opt(argc, argv, "--bad");
  const char *at_s = prog_opt(argc, argv, "--at");
  int iters = prog_iters(argc, argv, 60), at = at_s ? atoi(at_s) : 35;
  if (!bad) bad = "past-end";
  bool copying = strcmp(bad, "freed-src") == 0 || strcmp(bad, "copy-past-end") == 0;
  CUstream s;
  CUdeviceptr buf, src, gone, acc;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&buf, N * 4));
  CK(cuMemAlloc(&src, N * 4));
  CK(cuMemAlloc(&gone, N * 4));
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemsetD32(buf, 0, N));
  CK(cuMemsetD32(src, 7, N));
  CK(cuMemsetD32(gone, 9, N));
  CK(cuMemsetD8(acc, 0, 8));
  unsigned long long tag = 1;
  for (int it = 0; it < iters; it++) {
    bool now = it >= at;
    chain3(chain, &acc, &tag, s);
    if (copying) {
      CUdeviceptr from = src, to = buf;
      size_t bytes = N * 2;
      if (now && strcmp(bad, "freed-src") == 0) {
        if (it == at) CK(cuMemFree(gone));
        from = gone;
      } else if (now) {
        to = buf + N * 4 - 64;  /* 64 bytes left, 2 KiB copied */
      }
      note_rc(it, "cuMemcpyDtoDAsync", cuMemcpyDtoDAsync(to, from, bytes, s));
    } else {
      CUdeviceptr to = buf;
      size_t n = N / 2;
      if (now && strcmp(bad, "misaligned") == 0) to = buf + 2;
      else if (now) n = N + 64;
      note_rc(it, "cuMemsetD32Async", cuMemsetD32Async(to, (unsigned)it, n, s));
    }
    chain3(chain, &acc, &tag, s);
    note_rc(it, "cuStreamSynchronize", cuStreamSynchronize(s));
    h = prog_mix_device(h, acc, 8);
  }
  note_rc(iters, "cuCtxSynchronize", cuCtxSynchronize());
  h = prog_mix_device(h, buf, N * 4);
  h = prog_mix_device(h, src, N * 4);
  printf("checksum %016llx\n", h);
  return 0;
}

static int order(int argc, char **argv, CUmodule mod)
{
  int iters = prog_iters(argc, argv, 40);
  const char *grid_s = prog_opt(argc, argv, "--grid");
  unsigned grid = grid_s ? (unsigned)atoi(grid_s) : 1;
  CUfunction set = prog_fn(mod, "cg_set_flag"), wait = prog_fn(mod, "cg_wait_all");
  CUstream producer, consumer;
  CUdeviceptr flag;
  CK(cuStreamCreate(&producer, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&consumer, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&flag, 8));
  CK(cuMemsetD8(flag, 0, 8));
  for (int it = 1; it <= iters; it++) {
    void *p[] = { &flag, &it };
    CK(cuLaunchKernel(set, 1, 1, 1, 1, 1, 1, 0, producer, p, NULL));
    CK(cuLaunchKernel(wait, grid, 1, 1, grid > 1 ? 1024 : 1, 1, 1, 0, consumer, p, NULL));
    CK(cuCtxSynchronize());
  }
  h = prog_mix_device(h, flag, 4);
  printf("checksum %016llx\n", h);
  return 0;
}

static int blocking(int argc, char **argv, CUmodule mod)
{
  int iters = prog_iters(argc, argv, 300);
  CUfunction set = prog_fn(mod, "cg_set_flag");
  volatile int *host;
  CUdeviceptr dev;
  CK(cuMemHostAlloc((void **)&host, 64, CU_MEMHOSTALLOC_DEVICEMAP));
  CK(cuMemHostGetDevicePointer(&dev, (void *)host, 0));
  host[0] = 0;
  int stale = 0;
  for (int it = 1; it <= iters; it++) {
    void *p[] = { &dev, &it };
    CK(cuLaunchKernel(set, 1, 1, 1, 1, 1, 1, 0, 0, p, NULL));
    stale += host[0] != it;
  }
  CK(cuCtxSynchronize());
  printf("stale %d\nchecksum %016llx\n", stale, prog_mix(h, (unsigned long long)host[0]));
  return 0;
}

int main(int argc, char **argv)
{
  const char *mode = prog_opt(argc, argv, "--mode");
  prog_init();
  CUmodule mod = prog_module();
  if (mode && strcmp(mode, "memop") == 0) return memop(argc, argv, prog_fn(mod, "cg_chain"));
  if (mode && strcmp(mode, "order") == 0) return order(argc, argv, mod);
  if (mode && strcmp(mode, "blocking") == 0) return blocking(argc, argv, mod);
  fprintf(stderr, "usage: conf_edges --mode memop|order|blocking [--iters N]\n");
  return 2;
}
