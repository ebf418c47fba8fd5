/* alike: a step of two chunks that begin with the same kernel, cut apart by an event record (as
 * in each thread of conf-rt-ptds), whose first launch has a larger grid than the driver accepted
 * for that kernel before (one launch of one block before the loop): the shim runs that launch
 * itself, as a shape not proven yet. Each chunk is learned at its first sighting and runs as its
 * graph from its second, whichever of the two chunks was learned last. Prints `checksum <hex>`.
 * usage: alike [--iters N] */
#include "prog.h"
#include <stdio.h>

enum { N = 1024 };

static CUfunction chain, fill, mix;
static CUstream s;
static CUdeviceptr acc, buf;
static unsigned long long tag;

static void c(int n)
{
  tag++;
  void *p[] = { &acc, &tag };
  prog_launch(chain, n, s, p);
}

static void f(void)
{
  float v = 0.5f;
  int n = N;
  void *p[] = { &buf, &v, &n };
  prog_launch(fill, N, s, p);
}

static void m(void)
{
  int n = N;
  tag++;
  void *p[] = { &buf, &n, &tag };
  prog_launch(mix, N, s, p);
}

int main(int argc, char **argv)
{
  int iters = prog_iters(argc, argv, 40);
  prog_init();
  CUmodule mod = prog_module();
  chain = prog_fn(mod, "cg_chain");
  fill = prog_fn(mod, "cg_fill_f32");
  mix = prog_fn(mod, "cg_step_mix");
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&acc, sizeof(unsigned long long)));
  CK(cuMemAlloc(&buf, N * sizeof(float)));
  CK(cuMemsetD8Async(acc, 0, sizeof(unsigned long long), s));
  CUevent ev;
  CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  c(0);  /* one block: the loop's larger grid is a shape the driver has not accepted yet */
  CK(cuStreamSynchronize(s));
  unsigned long long h = 14695981039346656037ULL;
  for (int it = 0; it < iters; it++) {
    c(N), c(N), c(N), c(N), f(), c(N), f(), c(N), c(N), c(N), c(N), m();
    CK(cuEventRecord(ev, s));
    c(N), c(N), m(), c(N), f();
    CK(cuStreamSynchronize(s));
    if (it % 10 == 9 || it == iters - 1) {
      h = prog_mix_device(h, acc, sizeof(unsigned long long));
      h = prog_mix_device(h, buf, N * sizeof(float));
    }
  }
  printf("checksum %016llx\n", h);
  CK(cuEventDestroy(ev));
  return 0;
}
