/* fourway: reaches the driver in the four ways real programs do and mixes them in one loop:
 * (a) linked symbols, (b) dlopen("libcuda.so.1") + dlsym, (c) cuGetProcAddress (legacy and
 * per-thread-default-stream variants) found through dlsym, (d) libtritonish, which dlopens the
 * driver itself and launches with cuLaunchKernelEx. Prints `checksum <hex>` and `launches <n>`.
 * usage: fourway [--iters N] [--unlisted] [--image FILE] */
#include "prog.h"
#include "tritonish.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);

enum path { DIRECT, DLSYM, PROC, PROC_PTSZ, TRITON, TRITON_PACKED, NPATHS };
static const char *const path_name[NPATHS] = { "direct", "dlsym", "procaddr", "procaddr-ptsz",
                                               "tritonish", "tritonish-packed" };

static launch_fn dl_launch, proc_launch, proc_launch_ptsz;
static CUresult (*dl_memset32)(CUdeviceptr, unsigned, size_t, CUstream);
static CUresult (*proc_dtod_ptsz)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*proc_prio_range)(int *, int *);
static unsigned long long launches;

enum { N = 1024 };  /* floats per buffer */

static void *must(void *p, const char *what)
{
  if (!p) { fprintf(stderr, "lookup of %s failed\n", what); exit(1); }
  return p;
}

static void resolve(void)
{
  void *h = must(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL), "libcuda.so.1");
  *(void **)&dl_launch = must(dlsym(h, "cuLaunchKernel"), "cuLaunchKernel");
  *(void **)&dl_memset32 = must(dlsym(h, "cuMemsetD32Async"), "cuMemsetD32Async");
  CUresult (*get_proc)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
  *(void **)&get_proc = must(dlsym(h, "cuGetProcAddress_v2"), "cuGetProcAddress_v2");
  const struct { const char *name; cuuint64_t flags; void **fn; } want[] = {
    { "cuLaunchKernel", CU_GET_PROC_ADDRESS_DEFAULT, (void **)&proc_launch },
    { "cuLaunchKernel", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void **)&proc_launch_ptsz },
    { "cuMemcpyDtoDAsync", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void **)&proc_dtod_ptsz },
    { "cuCtxGetStreamPriorityRange", CU_GET_PROC_ADDRESS_DEFAULT, (void **)&proc_prio_range },
  };
  for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++) {
    CUdriverProcAddressQueryResult status;
    CK(get_proc(want[i].name, want[i].fn, CUDA_VERSION, want[i].flags, &status));
    if (status != CU_GET_PROC_ADDRESS_SUCCESS) must(NULL, want[i].name);
  }
  if (tritonish_init() != 0) must(NULL, "tritonish");
}

/* One launch of f through path p; n > 0 sizes an elementwise grid. The per-thread variant and
 * the Triton path get the created stream, so the legacy stream is only used where it orders. */
static void launch(enum path p, CUfunction f, CUstream s, void **params, void *packed,
                   size_t packed_size, int n)
{
  unsigned block = n > 0 ? 256 : 1, grid = n > 0 ? (unsigned)(n + 255) / 256 : 1;
  CUresult r = CUDA_SUCCESS;
  switch (p) {
  case DIRECT: r = cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL); break;
  case DLSYM: r = dl_launch(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL); break;
  case PROC: r = proc_launch(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL); break;
  case PROC_PTSZ: r = proc_launch_ptsz(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL); break;
  case TRITON: r = tritonish_launch(f, s, grid, block, params); break;
  case TRITON_PACKED: r = tritonish_launch_packed(f, s, grid, block, packed, packed_size); break;
  case NPATHS: break;
  }
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "launch through %s: ", path_name[p]);
    CK(r);
  }
  launches++;
}

struct chain_args { CUdeviceptr acc; unsigned long long tag; };  /* cg_chain's packed layout */
struct big { unsigned long long v[64]; };

int main(int argc, char **argv)
{
  const char *iters_opt = prog_opt(argc, argv, "--iters");
  int iters = iters_opt ? atoi(iters_opt) : 50;
  int unlisted = prog_flag(argc, argv, "--unlisted");
  prog_init();
  resolve();
  const void *image = prog_image(argc, argv);
  CUmodule mod;
  CK(cuModuleLoadData(&mod, image));
  CUfunction chain = prog_fn(mod, "cg_chain"), fill = prog_fn(mod, "cg_fill_f32"),
             scale = prog_fn(mod, "cg_scale_f32"), mix = prog_fn(mod, "cg_step_mix"),
             big_arg = prog_fn(mod, "cg_big_arg");
  /* launch handles may be CUkernel, as cuBLAS and the runtime use them */
  CUlibrary lib;
  CUkernel axpy_kernel;
  CK(cuLibraryLoadData(&lib, image, NULL, NULL, 0, NULL, NULL, 0));
  CK(cuLibraryGetKernel(&axpy_kernel, lib, "cg_axpy_f32"));
  CUfunction axpy = (CUfunction)axpy_kernel;

  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_DEFAULT));  /* blocking: orders with the legacy stream */
  CUdeviceptr acc, out, bufs[2], scratch, scratch2, scratch3;
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemAlloc(&out, 8));
  CUdeviceptr *all[] = { &bufs[0], &bufs[1], &scratch, &scratch2, &scratch3 };
  for (unsigned i = 0; i < 5; i++) {
    CK(cuMemAlloc(all[i], N * sizeof(float)));
    CK(cuMemsetD32(*all[i], 0, N));
  }
  CK(cuMemsetD8(acc, 0, 8));
  CK(cuMemsetD8(out, 0, 8));

  unsigned long long h = 14695981039346656037ULL;
  int n = N;
  for (int it = 0; it < iters; it++) {
    unsigned long long step = (unsigned long long)it, tag = (unsigned long long)it << 8;
    CUdeviceptr cur = bufs[it & 1], other = bufs[!(it & 1)];
    float quarter = 0.25f, half = 0.5f, shrink = 0.999f;
    void *chain_p[] = { &acc, &tag };
    void *mix_p[] = { &cur, &n, &step };
    void *axpy_p[] = { &cur, &other, &quarter, &n };
    void *scale_p[] = { &other, &shrink, &n };

    tag++; launch(DIRECT, chain, s, chain_p, NULL, 0, 0);
    CK(dl_memset32(scratch, (unsigned)it, N, s));
    tag++; launch(DLSYM, chain, 0, chain_p, NULL, 0, 0);
    launch(PROC, mix, s, mix_p, NULL, 0, N);
    launch(PROC_PTSZ, axpy, s, axpy_p, NULL, 0, N);
    launch(TRITON, scale, s, scale_p, NULL, 0, N);
    struct chain_args packed = { acc, ++tag };
    launch(TRITON_PACKED, chain, s, NULL, &packed, sizeof packed, 0);
    for (int k = 0; k < 30; k++) {
      enum path p = (enum path)(k % NPATHS);
      CUstream st = k % 3 == 0 && p != PROC_PTSZ && p < TRITON ? 0 : s;
      if (p == TRITON_PACKED) {
        struct chain_args a = { acc, ++tag };
        launch(p, chain, st, NULL, &a, sizeof a, 0);
      } else {
        tag++;
        launch(p, chain, st, chain_p, NULL, 0, 0);
      }
      if (k == 6) {
        struct big b;
        for (int i = 0; i < 64; i++) b.v[i] = (unsigned long long)it * 64 + (unsigned long long)i;
        void *big_p[] = { &b, &out };
        launch(DIRECT, big_arg, s, big_p, NULL, 0, 0);
      } else if (k == 9) {
        struct { CUdeviceptr p; float v; int n; } f = { scratch2, (float)it, N };
        launch(TRITON_PACKED, fill, s, NULL, &f, sizeof f, N);
      } else if (k == 12 && unlisted) {
        int least, greatest;  /* an entry point the shim does not list, before any sync */
        CK(proc_prio_range(&least, &greatest));
      } else if (k == 15) {
        CK(proc_dtod_ptsz(scratch3, cur, N * sizeof(float), s));
      } else if (k == 18) {
        void *p2[] = { &scratch3, &scratch2, &half, &n };
        launch(DLSYM, axpy, s, p2, NULL, 0, N);
      }
    }
    CK(cuStreamSynchronize(s));
    unsigned long long a;
    CK(cuMemcpyDtoH(&a, acc, sizeof a));
    h = prog_mix(h, a);
  }
  h = prog_mix_device(h, out, 8);
  for (unsigned i = 0; i < 5; i++) h = prog_mix_device(h, *all[i], N * sizeof(float));
  printf("checksum %016llx\nlaunches %llu\n", h, launches);
  return 0;
}
