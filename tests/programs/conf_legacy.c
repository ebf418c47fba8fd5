/* conf_legacy: work interleaved on the legacy default stream (0), a created blocking stream and
 * a created non-blocking stream. The blocking stream consumes the legacy stream's results, and
 * the legacy stream the blocking one's, only through the implicit legacy synchronisation (no
 * events): a shim that defers work across that ordering changes the checksum. The non-blocking
 * stream shares nothing with the others. Prints `checksum <hex>`. usage: conf_legacy [--iters N] */
#include "prog.h"
#include <stdio.h>

enum { N = 1024 };

int main(int argc, char **argv)
{
  int iters = prog_iters(argc, argv, 40);
  prog_init();
  CUmodule mod = prog_module();
  CUfunction chain = prog_fn(mod, "cg_chain"), mix = prog_fn(mod, "cg_step_mix"),
             scale = prog_fn(mod, "cg_scale_f32"), axpy = prog_fn(mod, "cg_axpy_f32");
  CUstream blocking, nonblocking;
  CK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
  CK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x, z, w, acc, acc_nb;
  CUdeviceptr *bufs[] = { &x, &z, &w };
  for (unsigned i = 0; i < 3; i++) {
    CK(cuMemAlloc(bufs[i], N * sizeof(float)));
    CK(cuMemsetD32(*bufs[i], 0, N));
  }
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemAlloc(&acc_nb, 8));
  CK(cuMemsetD8(acc, 0, 8));
  CK(cuMemsetD8(acc_nb, 0, 8));

  unsigned long long h = 14695981039346656037ULL;
  int n = N;
  for (int it = 0; it < iters; it++) {
    unsigned long long step = (unsigned long long)it, nb_step = step + 1000,
                       tag = (unsigned long long)it << 4;
    float half = 0.5f, eighth = 0.125f, shrink = 0.9f;
    void *mix_x[] = { &x, &n, &step }, *scale_x[] = { &x, &shrink, &n },
         *z_from_x[] = { &z, &x, &half, &n }, *scale_z[] = { &z, &shrink, &n },
         *x_from_z[] = { &x, &z, &eighth, &n }, *chain_p[] = { &acc, &tag },
         *mix_w[] = { &w, &n, &nb_step }, *chain_nb[] = { &acc_nb, &tag };

    prog_launch(mix, N, 0, mix_x);                          /* legacy: x */
    for (int k = 0; k < 2; k++, tag++) prog_launch(chain, 0, 0, chain_p);
    prog_launch(axpy, N, blocking, z_from_x);               /* blocking: z += x/2, after legacy */
    prog_launch(scale, N, blocking, scale_z);
    for (int k = 0; k < 2; k++, tag++) prog_launch(chain, 0, blocking, chain_p);
    prog_launch(axpy, N, 0, x_from_z);                      /* legacy: x += z/8, after blocking */
    prog_launch(scale, N, 0, scale_x);
    prog_launch(mix, N, nonblocking, mix_w);                /* non-blocking: its own buffers */
    for (int k = 0; k < 3; k++, tag++) prog_launch(chain, 0, nonblocking, chain_nb);
    prog_launch(axpy, N, blocking, z_from_x);               /* blocking again, after legacy */
    for (int k = 0; k < 2; k++, tag++) prog_launch(chain, 0, blocking, chain_p);
    CK(cuCtxSynchronize());
    unsigned long long a;
    CK(cuMemcpyDtoH(&a, acc, sizeof a));
    h = prog_mix(h, a);
  }
  h = prog_mix_device(h, acc_nb, 8);
  for (unsigned i = 0; i < 3; i++) h = prog_mix_device(h, *bufs[i], N * sizeof(float));
  printf("checksum %016llx\n", h);
  return 0;
}
