/* conf_swap: a decoding-like loop in which every token changes the arguments of nearly every
 * launch (a counter, an element count growing by one) and picks the kernel at one position by
 * its length, as cuBLAS picks another GEMM at some lengths: `scale` for --period tokens, then
 * `fill` for as many, by turns (1: every other token). Each token's 12 kernels, with no launch
 * attributes, end with a read of the result; the last two launches' arguments never change.
 * The later variant's graph can run on the earlier one's executable, every node patched (the
 * function too) when the executable last ran the other: a replay that ran a node with the other
 * variant's function or arguments changes the checksum. Prints `checksum <hex>`.
 * usage: conf_swap [--iters N] [--period P] */
#include "prog.h"
#include <stdio.h>
#include <stdlib.h>

enum { N = 1024, GROW = 512 };

struct k {
  CUfunction chain, mix, scale, fill;
  CUstream s;
  CUdeviceptr acc, x, y, z, w;
  unsigned long long tag;
};

static void chain(struct k *k)
{
  k->tag++;
  void *p[] = { &k->acc, &k->tag };
  prog_launch(k->chain, 0, k->s, p);
}

static void mix(struct k *k, CUdeviceptr *buf, int n)
{
  k->tag++;
  void *p[] = { buf, &n, &k->tag };
  prog_launch(k->mix, n, k->s, p);
}

static void token(struct k *k, int t, int period)
{
  int n = GROW + t % (N - GROW);  /* the context grows (wrapping within the buffers) */
  mix(k, &k->x, n);
  chain(k);
  if ((t / period) % 2 == 0) {
    float a = 0.5f + (float)(t % 7) / 8.f;
    void *p[] = { &k->x, &a, &n };
    prog_launch(k->scale, n, k->s, p);
  } else {
    float v = (float)t;
    void *p[] = { &k->y, &v, &n };
    prog_launch(k->fill, n, k->s, p);
  }
  chain(k);
  mix(k, &k->y, n);
  chain(k);
  chain(k);
  mix(k, &k->x, n);
  chain(k);
  chain(k);
  float two = 2.f, one = 1.f;
  int all = N;
  void *sp[] = { &k->z, &two, &all }, *fp[] = { &k->w, &one, &all };
  prog_launch(k->scale, N, k->s, sp);
  prog_launch(k->fill, N, k->s, fp);
}

int main(int argc, char **argv)
{
  int iters = prog_iters(argc, argv, 200);
  const char *per = prog_opt(argc, argv, "--period");
  int period = per ? atoi(per) : 8;
  if (period < 1)
    period = 1;
  struct k k = { 0 };
  prog_init();
  CUmodule mod = prog_module();
  k.chain = prog_fn(mod, "cg_chain");
  k.mix = prog_fn(mod, "cg_step_mix");
  k.scale = prog_fn(mod, "cg_scale_f32");
  k.fill = prog_fn(mod, "cg_fill_f32");
  CK(cuStreamCreate(&k.s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&k.acc, sizeof(unsigned long long)));
  CUdeviceptr *bufs[] = { &k.x, &k.y, &k.z, &k.w };
  for (int i = 0; i < 4; i++) {
    CK(cuMemAlloc(bufs[i], N * sizeof(float)));
    CK(cuMemsetD32Async(*bufs[i], 0, N, k.s));
  }
  CK(cuMemsetD8Async(k.acc, 0, sizeof(unsigned long long), k.s));
  unsigned long long h = 14695981039346656037ULL;
  for (int t = 0; t < iters; t++) {
    token(&k, t, period);
    CK(cuStreamSynchronize(k.s));  /* the copy below runs on the legacy stream */
    h = prog_mix_device(h, k.acc, sizeof(unsigned long long));  /* the token read */
  }
  for (int i = 0; i < 4; i++)
    h = prog_mix_device(h, *bufs[i], N * sizeof(float));
  printf("checksum %016llx\n", h);
  return 0;
}
