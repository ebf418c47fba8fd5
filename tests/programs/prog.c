/* Helpers shared by the driver-API test programs (see prog.h). */
#include "prog.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void prog_check(CUresult r, const char *what, const char *file, int line)
{
  if (r == CUDA_SUCCESS) return;
  const char *name = NULL;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "?";
  fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", file, line, what, name, (int)r);
  exit(1);
}

CUcontext prog_init(void) { return prog_init_device(0); }

CUcontext prog_init_device(int ordinal)
{
  CUresult r = cuInit(0);
  int n = 0;
  if (r == CUDA_ERROR_NO_DEVICE || (r == CUDA_SUCCESS && cuDeviceGetCount(&n) == CUDA_SUCCESS && n == 0)) {
    fprintf(stderr, "no CUDA device\n");
    exit(77);
  }
  CK(r);
  CUdevice dev;
  CUcontext ctx;
  CK(cuDeviceGet(&dev, ordinal % n)); /* n > 0: counted above when cuInit succeeded */
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  return ctx;
}

CUmodule prog_module(void)
{
  CUmodule m;
  CK(cuModuleLoadData(&m, kernels_ptx));
  return m;
}

const void *prog_image(int argc, char **argv)
{
  const char *path = prog_opt(argc, argv, "--image");
  if (!path) return kernels_ptx;
  FILE *f = fopen(path, "rb");
  long n = -1;
  if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
  char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (!buf || fseek(f, 0, SEEK_SET) != 0 || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  buf[n] = '\0';  /* PTX is text */
  fclose(f);
  return buf;
}

CUfunction prog_fn(CUmodule m, const char *name)
{
  CUfunction f;
  CK(cuModuleGetFunction(&f, m, name));
  return f;
}

unsigned long long prog_mix(unsigned long long h, unsigned long long v)
{
  for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ULL;
  return h;
}

unsigned long long prog_mix_bytes(unsigned long long h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

unsigned long long prog_mix_device(unsigned long long h, CUdeviceptr p, size_t n)
{
  unsigned char *buf = malloc(n);
  if (!buf) { fprintf(stderr, "out of host memory\n"); exit(1); }
  CK(cuMemcpyDtoH(buf, p, n));
  h = prog_mix_bytes(h, buf, n);
  free(buf);
  return h;
}

const char *prog_opt(int argc, char **argv, const char *name)
{
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return argv[i + 1];
  return NULL;
}

int prog_flag(int argc, char **argv, const char *name)
{
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], name) == 0) return 1;
  return 0;
}

int prog_iters(int argc, char **argv, int def)
{
  const char *v = prog_opt(argc, argv, "--iters");
  return v ? atoi(v) : def;
}

void prog_launch(CUfunction f, int n, CUstream s, void **params)
{
  unsigned block = n > 0 ? 256 : 1, grid = n > 0 ? (unsigned)(n + 255) / 256 : 1;
  CK(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL));
}
