/* passthrough: what the driver calls cugraft only forwards cost the calling thread. Each call is
 * made N times in a row on a stream with no work of the program's in flight (the state in which
 * a program polls or records events), timed by the thread's CPU clock, which the machine's other
 * load does not inflate the way wall time is. Prints `<call>_ns <ns per call>` per call, then
 * `iter_us` (the mean over all calls, for bench/sweep). Run it with and without the shim.
 * `--only CALL` makes that call alone (bench/passcost counts its instructions).
 * usage: passthrough [--calls N] [--only CALL] */
#include "hand_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const char mb_kernels_ptx[];

static double thread_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    int calls = 200000;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--calls") && i + 1 < argc && (calls = atoi(argv[++i])) > 0)
            continue;
        if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
            continue;
        }
        fprintf(stderr, "usage: %s [--calls N] [--only CALL]\n", argv[0]);
        return 2;
    }
    CUmodule mod = hg_open(mb_kernels_ptx);
    CUfunction f;
    HG_CHECK(cuModuleGetFunction(&f, mod, "mb_axb"));
    CUstream s;
    HG_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p;
    int n = 256;
    float a = 1.0f, b = 0.0f;
    HG_CHECK(cuMemAlloc(&p, (size_t)n * sizeof(float)));
    HG_CHECK(cuMemsetD32Async(p, 0, (size_t)n, s));
    CUevent ev;
    HG_CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));

    /* A one-kernel graph of the program's own, for its launches and node updates. */
    void *args[] = { &p, &a, &b, &n };
    CUgraph g;
    CUgraphExec exec;
    CUgraphNode node;
    CUDA_KERNEL_NODE_PARAMS kp = { .func = f, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                   .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1,
                                   .kernelParams = args };
    HG_CHECK(cuGraphCreate(&g, 0));
    HG_CHECK(cuGraphAddKernelNode(&node, g, NULL, 0, &kp));
    HG_CHECK(cuGraphInstantiate(&exec, g, 0));
    HG_CHECK(cuStreamSynchronize(s));

    double total = 0;
    int kinds = 0;
#define TIME(name, call)                                                                      \
    do {                                                                                      \
        if (only && strcmp(only, name))                                                       \
            break;                                                                            \
        double t0 = thread_ns();                                                              \
        for (int i = 0; i < calls; i++)                                                       \
            (void)(call);                                                                     \
        double per = (thread_ns() - t0) / calls;                                              \
        printf("%s_ns %.1f\n", name, per);                                                    \
        total += per;                                                                         \
        kinds++;                                                                              \
        HG_CHECK(cuStreamSynchronize(s));                                                     \
    } while (0)

    TIME("cuEventRecord", cuEventRecord(ev, s));
    TIME("cuEventQuery", cuEventQuery(ev));
    TIME("cuStreamQuery", cuStreamQuery(s));
    TIME("cuGraphExecKernelNodeSetParams", cuGraphExecKernelNodeSetParams(exec, node, &kp));
    /* A graph launch queues work: fewer of them, each followed by a query of the stream. */
    calls = calls / 10 > 0 ? calls / 10 : 1;
    TIME("cuGraphLaunch", cuGraphLaunch(exec, s));
    HG_CHECK(cuStreamSynchronize(s));
    if (kinds)
        printf("iter_us %.4f\n", total / kinds / 1e3);
    return 0;
}
