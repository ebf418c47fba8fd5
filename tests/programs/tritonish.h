/* libtritonish: launches kernels the way Triton's generated launchers reach the driver: its own
 * dlopen("libcuda.so.1") and dlsym("cuLaunchKernelEx") on that handle, bypassing any symbol a
 * preloaded library exports. */
#pragma once
#include <cuda.h>
#include <stddef.h>

/* Opens the driver and looks up cuLaunchKernelEx; 0 on success. */
int tritonish_init(void);
/* kernelParams form, with a launch attribute as Triton sets one. */
CUresult tritonish_launch(CUfunction f, CUstream s, unsigned grid, unsigned block, void **params);
/* `extra` form with a packed argument buffer (as NCCL launches). */
CUresult tritonish_launch_packed(CUfunction f, CUstream s, unsigned grid, unsigned block,
                                 void *args, size_t size);
