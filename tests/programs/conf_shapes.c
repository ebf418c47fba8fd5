/* conf_shapes: the same kernel sequence whose grid and element count change every 7th
 * iteration (shape buckets), with a different last iteration (divergence), then a loop where
 * every 10th iteration adds logging kernels in the middle. A shim replaying a graph learned for
 * another shape, or a stale template past a divergence, changes the checksum.
 * Prints `checksum <hex>`. usage: conf_shapes [--iters N] */
#include "prog.h"
#include <stdio.h>

enum { N = 1024 };

struct k { CUfunction chain, mix, scale, axpy, fill; CUstream s; CUdeviceptr x, y, acc, log; };

/* One training-like step over n elements; `last` swaps the axpy for a fill. */
static void step(const struct k *k, int it, int n, int last)
{
  unsigned long long st = (unsigned long long)it, tag = (unsigned long long)it << 4;
  float half = 0.5f, quarter = 0.25f, v = (float)it;
  void *mix_p[] = { (void *)&k->x, &n, &st }, *scale_p[] = { (void *)&k->x, &half, &n },
       *axpy_p[] = { (void *)&k->y, (void *)&k->x, &quarter, &n },
       *fill_p[] = { (void *)&k->y, &v, &n }, *chain_p[] = { (void *)&k->acc, &tag };
  prog_launch(k->mix, n, k->s, mix_p);
  prog_launch(k->scale, n, k->s, scale_p);
  for (int i = 0; i < 3; i++, tag++) prog_launch(k->chain, 0, k->s, chain_p);
  if (last) prog_launch(k->fill, n, k->s, fill_p);
  else prog_launch(k->axpy, n, k->s, axpy_p);
  prog_launch(k->mix, n, k->s, mix_p);
  for (int i = 0; i < 3; i++, tag++) prog_launch(k->chain, 0, k->s, chain_p);
}

static unsigned long long sync_read(const struct k *k, unsigned long long h)
{
  unsigned long long a;
  CK(cuStreamSynchronize(k->s));
  CK(cuMemcpyDtoH(&a, k->acc, sizeof a));
  return prog_mix(h, a);
}

int main(int argc, char **argv)
{
  int iters = prog_iters(argc, argv, 50);
  prog_init();
  CUmodule mod = prog_module();
  struct k k = { .chain = prog_fn(mod, "cg_chain"), .mix = prog_fn(mod, "cg_step_mix"),
                 .scale = prog_fn(mod, "cg_scale_f32"), .axpy = prog_fn(mod, "cg_axpy_f32"),
                 .fill = prog_fn(mod, "cg_fill_f32") };
  CK(cuStreamCreate(&k.s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&k.x, N * sizeof(float)));
  CK(cuMemAlloc(&k.y, N * sizeof(float)));
  CK(cuMemAlloc(&k.acc, 8));
  CK(cuMemAlloc(&k.log, 8));
  CK(cuMemsetD32(k.x, 0, N));
  CK(cuMemsetD32(k.y, 0, N));
  CK(cuMemsetD8(k.acc, 0, 8));
  CK(cuMemsetD8(k.log, 0, 8));

  unsigned long long h = 14695981039346656037ULL;
  /* Buckets of 256, 512, 1024, 768 elements (1 to 4 blocks), 7 iterations each. */
  static const int bucket[] = { 256, 512, 1024, 768 };
  for (int it = 0; it < iters; it++) {
    step(&k, it, bucket[(it / 7) % 4], it == iters - 1);
    h = sync_read(&k, h);
  }
  /* Fixed shape; every 10th iteration logs between the halves of the step. */
  for (int it = 0; it < iters; it++) {
    step(&k, it, N, 0);
    if (it % 10 == 9) {
      unsigned long long tag = 0xabcULL + (unsigned long long)it;
      float ten = 10.f;
      int n = N;
      void *log_p[] = { &k.log, &tag }, *scale_p[] = { &k.y, &ten, &n };
      prog_launch(k.chain, 0, k.s, log_p);
      prog_launch(k.scale, N, k.s, scale_p);
    }
    step(&k, it + 1000, N, 0);
    h = sync_read(&k, h);
  }
  h = prog_mix_device(h, k.log, 8);
  h = prog_mix_device(h, k.x, N * sizeof(float));
  h = prog_mix_device(h, k.y, N * sizeof(float));
  printf("checksum %016llx\n", h);
  return 0;
}
