/* Prototypes of the fake driver's exports that cuda.h hides in its default mode: the _ptsz
 * (per-thread default stream) variants and the older ABIs cuGetProcAddress (4 arguments) and
 * cuCtxCreate_v2; and entry points of drivers newer than this cuda.h (parameter counts).
 * abi_check.c re-reads these against cuda.h's internal declarations. */
#pragma once
#include <cuda.h>

#undef cuGetProcAddress  /* the bare name is the 4-argument ABI; the 5-argument one is _v2 */
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
  unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
  unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);
CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
  void **kernelParams, void **extra);
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData);
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
  size_t ByteCount, CUstream hStream);
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice,
  size_t ByteCount, CUstream hStream);
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
  size_t ByteCount, CUstream hStream);
CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
  CUstream hStream);
CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
  CUstream hStream);
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream);
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream);
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags);
CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx);
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
  CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out, CUgraph *graph_out,
  const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
  size_t *numDependencies_out);
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);

/* Newer drivers: the number of parameters of a function or kernel. */
CUresult CUDAAPI cuFuncGetParamCount(CUfunction func, size_t *paramCount);
CUresult CUDAAPI cuKernelGetParamCount(CUkernel kernel, size_t *paramCount);

/* Not a driver entry point: lets a test write FAKECUDA_STATS before exit. */
void fakecuda_write_stats(void);
/* Not a driver entry point: a fake CUPTI (tests/fakecupti) turns the simulated device timeline
 * on (fake.h, cg_gpu_run): from then on every op run is an interval [start, end) on `clock`,
 * given to `record`, and synchronous calls wait for the device to finish. */
void fakecuda_activity(uint64_t (*clock)(void), void (*record)(uint64_t start, uint64_t end));
