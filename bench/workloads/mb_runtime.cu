// mb-runtime: launch-overhead microbenchmark on the CUDA runtime API. One iteration = K <<<>>>
// launches of a tiny kernel on a created stream; one kernel in ten gets a by-value scalar that
// changes every iteration. --graph: capture one iteration by hand, patch those nodes, replay.
#include "checksum.h"
#include "mb_args.h"
#include "capture_rt.h"
#include "mb_kernels.cu"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

enum { BLOCK = 256 };

#define CHECK(call) check((call), #call)
static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "error: %s failed: %s\n", what, cudaGetErrorName(e));
        exit(1);
    }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static float scalar_a(int k, int it) { return k % 10 == 0 ? 0.5f + 0.0625f * (float)(it % 8) : 0.99f; }
static float scalar_b(int k) { return 0.001f * (float)(k % 13); }

int main(int argc, char **argv)
{
    const struct mb_args opt = mb_parse(argc, argv);
    const int kernels = opt.kernels, blocks = opt.blocks, iters = opt.iters, warmup = opt.warmup;
    const int sync_each = opt.sync_each, use_graph = opt.use_graph;
    int n = blocks * BLOCK;

    if (opt.syncs) {
        fprintf(stderr, "error: --syncs is a mb-driver option\n");
        return 2;
    }
    cudaStream_t s;
    float *p;
    if (opt.ptds)
        s = cudaStreamPerThread;
    else
        CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&p, (size_t)n * sizeof(float)));
    CHECK(cudaMemsetAsync(p, 0, (size_t)n * sizeof(float), s));
    CHECK(cudaStreamSynchronize(s));
    unsigned char *work = mb_host_buffer(&opt);
    if (opt.host_kib && !work)
        return 1;

    cudaGraphExec_t exec = NULL;
    cudaGraph_t graph = NULL;
    std::vector<cudaGraphNode_t> varying;   // nodes of the kernels whose `a` changes
    double t0 = 0;
    for (int it = 0; it < warmup + iters; it++) {
        if (it == warmup) {
            CHECK(cudaStreamSynchronize(s));
            t0 = now_us();
        }
        // With --graph, iteration 0 runs eagerly (first-launch work stays out of the capture),
        // iteration 1 is captured, later ones are patched and replayed.
        bool capture = use_graph && it == 1;
        if (!use_graph || it <= 1) {
            if (capture)
                CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            for (int k = 0; k < kernels; k++) {
                mb_host_work(work, &opt);
                mb_axb<<<blocks, BLOCK, 0, s>>>(p, scalar_a(k, it), scalar_b(k), n);
                if (capture && k % 10 == 0)
                    varying.push_back(wl_last_captured(s));
            }
            CHECK(cudaGetLastError());
            if (capture) {
                // The graph stays alive: its node handles name the nodes patched later.
                CHECK(cudaStreamEndCapture(s, &graph));
                CHECK(cudaGraphInstantiate(&exec, graph, 0));
            }
        } else {
            for (int k = 0; k < kernels; k++)  // the program's own work, as it does eagerly
                mb_host_work(work, &opt);
            for (size_t v = 0; v < varying.size(); v++) {
                int k = (int)v * 10;
                float a = scalar_a(k, it), b = scalar_b(k);
                void *args[] = {&p, &a, &b, &n};
                cudaKernelNodeParams kp = {};
                kp.func = (void *)mb_axb;
                kp.gridDim = dim3(blocks);
                kp.blockDim = dim3(BLOCK);
                kp.kernelParams = args;
                CHECK(cudaGraphExecKernelNodeSetParams(exec, varying[v], &kp));
            }
        }
        if (exec)
            CHECK(cudaGraphLaunch(exec, s));
        if (sync_each)
            CHECK(cudaStreamSynchronize(s));
    }
    CHECK(cudaStreamSynchronize(s));
    double iter_us = (now_us() - t0) / iters;

    std::vector<float> host(n);
    CHECK(cudaMemcpy(host.data(), p, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost));
    printf("checksum %016llx\n", (unsigned long long)wl_fnv1a(WL_FNV_OFFSET, host.data(), host.size() * sizeof(float)));
    printf("iter_us %.3f\n", iter_us);
    if (exec)
        CHECK(cudaGraphExecDestroy(exec));
    if (graph)
        CHECK(cudaGraphDestroy(graph));
    free(work);
    return 0;
}
