/* ncclloop: a data-parallel step around a 1-rank NCCL all-reduce. Per iteration on a created
 * stream: 10 kernels computing a "gradient" g, ncclAllReduce(g -> r, sum, float), 3 kernels that
 * read r, one stream sync and a DtoH read. --group puts the all-reduce in a group with one more
 * kernel (g *= 2) before ncclGroupEnd: with one rank NCCL enqueues its copy at the call, so that
 * write must NOT be reduced (a shim that holds the earlier kernels back to the group end gets
 * this wrong; measured on the H200). --dlsym calls ncclAllReduce through dlsym on a libnccl handle, as frameworks that
 * load NCCL themselves do. Prints `checksum <hex>` and `launches <n>` (this program's own). */
#include "prog.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h: ncclGroupStart() */
#include <nccl.h>
#pragma GCC diagnostic pop

#define NK(call) nccl_check((call), #call, __LINE__)
static void nccl_check(ncclResult_t r, const char *what, int line)
{
  if (r == ncclSuccess) return;
  fprintf(stderr, "ncclloop.c:%d: %s failed: %s (%d)\n", line, what, ncclGetErrorString(r), (int)r);
  exit(1);
}

enum { N = 4096 };
static CUstream s;
static unsigned long long launches;

static void launch(CUfunction f, void **p)
{
  CK(cuLaunchKernel(f, (N + 255) / 256, 1, 1, 256, 1, 1, 0, s, p, NULL));
  launches++;
}

int main(int argc, char **argv)
{
  const char *it = prog_opt(argc, argv, "--iters");
  int iters = it ? atoi(it) : 40, group = prog_flag(argc, argv, "--group");
  prog_init();
  CUmodule m = prog_module();
  CUfunction mix = prog_fn(m, "cg_step_mix"), axpy = prog_fn(m, "cg_axpy_f32"),
             scale = prog_fn(m, "cg_scale_f32"), chain = prog_fn(m, "cg_chain");
  __typeof__(&ncclAllReduce) allreduce = ncclAllReduce;
  if (prog_flag(argc, argv, "--dlsym")) {
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h || !(*(void **)&allreduce = dlsym(h, "ncclAllReduce"))) {
      fprintf(stderr, "ncclloop: no ncclAllReduce in libnccl.so.2\n");
      return 1;
    }
  }
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr g, r, w, acc;
  CK(cuMemAlloc(&g, N * sizeof(float)));
  CK(cuMemAlloc(&r, N * sizeof(float)));
  CK(cuMemAlloc(&w, N * sizeof(float)));
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemsetD32(g, 0, N));
  CK(cuMemsetD32(w, 0x3f800000, N)); /* 1.0f */
  CK(cuMemsetD8(acc, 0, 8));
  ncclComm_t comm;
  int dev = 0, nranks = 0;
  NK(ncclCommInitAll(&comm, 1, &dev));
  NK(ncclCommCount(comm, &nranks));
  if (nranks != 1) { fprintf(stderr, "ncclloop: %d ranks, want 1\n", nranks); return 1; }

  int n = N;
  float half = 0.5f, twice = 2.0f, decay = 0.999f, lr = -0.01f;
  unsigned long long h = 0;
  for (int i = 0; i < iters; i++) {
    unsigned long long step = (unsigned long long)i, tag1 = step << 8 | 1, tag2 = step << 8 | 2;
    float a[4] = { 0.25f, -0.125f, 0.0625f, 0.5f };
    launch(mix, (void *[]){ &g, &n, &step });
    for (int k = 0; k < 4; k++) {
      launch(axpy, (void *[]){ &g, &w, &a[k], &n });
      launch(scale, (void *[]){ &g, &half, &n });
    }
    launch(chain, (void *[]){ &acc, &tag1 });
    if (group) {
      NK(ncclGroupStart());
      NK(allreduce((const void *)g, (void *)r, N, ncclFloat, ncclSum, comm, s));
      launch(scale, (void *[]){ &g, &twice, &n });
      NK(ncclGroupEnd());
    } else {
      NK(allreduce((const void *)g, (void *)r, N, ncclFloat, ncclSum, comm, s));
    }
    launch(axpy, (void *[]){ &w, &r, &lr, &n });
    launch(chain, (void *[]){ &acc, &tag2 });
    launch(scale, (void *[]){ &w, &decay, &n });
    CK(cuStreamSynchronize(s));
    h = prog_mix_device(h, w, 8 * sizeof(float));
  }
  h = prog_mix_device(h, r, N * sizeof(float));
  h = prog_mix_device(h, w, N * sizeof(float));
  h = prog_mix_device(h, acc, 8);
  NK(ncclCommDestroy(comm));
  CK(cuStreamDestroy(s));
  printf("checksum %016llx\nlaunches %llu\n", h, launches);
  return 0;
}
