/* For the runtime-API workloads' hand-made graphs: the node a launch just added to a stream
 * capture is the capture's only dependency, so that node can be patched later. */
#ifndef BENCH_CAPTURE_RT_H
#define BENCH_CAPTURE_RT_H
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

static inline cudaGraphNode_t wl_last_captured(cudaStream_t s)
{
    cudaStreamCaptureStatus status;
    const cudaGraphNode_t *deps = NULL;
    size_t n = 0;
    cudaError_t e = cudaStreamGetCaptureInfo(s, &status, NULL, NULL, &deps, NULL, &n);
    if (e != cudaSuccess || status != cudaStreamCaptureStatusActive || n != 1) {
        fprintf(stderr, "error: capture lost track of its last node (%s)\n", cudaGetErrorString(e));
        exit(1);
    }
    return deps[0];
}
#endif
