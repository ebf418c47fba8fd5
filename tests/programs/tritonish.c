/* libtritonish (see tritonish.h): a second shared library that owns its driver handle. */
#include "tritonish.h"
#include <dlfcn.h>

static CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);

int tritonish_init(void)
{
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
  *(void **)&launch_ex = dlsym(h, "cuLaunchKernelEx");
  return launch_ex ? 0 : -1;
}

static CUlaunchConfig config(unsigned grid, unsigned block, CUstream s, CUlaunchAttribute *attr)
{
  attr->id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attr->value.priority = 0;
  return (CUlaunchConfig){ .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1, .blockDimX = block,
                           .blockDimY = 1, .blockDimZ = 1, .hStream = s, .attrs = attr,
                           .numAttrs = 1 };
}

CUresult tritonish_launch(CUfunction f, CUstream s, unsigned grid, unsigned block, void **params)
{
  CUlaunchAttribute attr;
  CUlaunchConfig c = config(grid, block, s, &attr);
  return launch_ex(&c, f, params, NULL);
}

CUresult tritonish_launch_packed(CUfunction f, CUstream s, unsigned grid, unsigned block,
                                 void *args, size_t size)
{
  CUlaunchAttribute attr;
  CUlaunchConfig c = config(grid, block, s, &attr);
  void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                    CU_LAUNCH_PARAM_END };
  return launch_ex(&c, f, NULL, extra);
}
