/* mb-driver: launch-overhead microbenchmark on the driver API. One iteration = K launches of a
 * tiny kernel (cuLaunchKernel, PTX module) on a created stream (--ptds: on the per-thread default
 * stream); one kernel in ten gets a by-value scalar that changes every iteration. --graph: the
 * hand-made graph reference. Prints iter_us (wall), cpu_us (the submitting thread's CPU time, spin-waits
 * included) and submit_us (wall time of the launch loop, without the closing sync); with
 * --host-kib, host_us: the wall time of the program's own work between launches, whatever a
 * shim's calls between them leave of its data in the caches. */
#include "checksum.h"
#include "mb_args.h"
#include "hand_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const char mb_kernels_ptx[];

enum { BLOCK = 256 };

static double clock_us(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    const struct mb_args opt = mb_parse(argc, argv);
    const int kernels = opt.kernels, blocks = opt.blocks, iters = opt.iters, warmup = opt.warmup;
    const int sync_each = opt.sync_each, use_graph = opt.use_graph, ptds = opt.ptds;
    int n = blocks * BLOCK;

    CUfunction f;
    CUstream s;
    CUdeviceptr p;
    CUmodule mod = hg_open(mb_kernels_ptx);
    HG_CHECK(cuModuleGetFunction(&f, mod, "mb_axb"));
    if (ptds)
        s = CU_STREAM_PER_THREAD;
    else
        HG_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    HG_CHECK(cuMemAlloc(&p, (size_t)n * sizeof(float)));
    HG_CHECK(cuMemsetD32Async(p, 0, (size_t)n, s));   /* 0.0f */
    HG_CHECK(cuStreamSynchronize(s));

    unsigned char *work = mb_host_buffer(&opt);
    if (opt.host_kib && !work)
        return 1;
    struct hand_graph h;
    hg_init(&h, s, use_graph);
    double t0 = 0, c0 = 0, submit = 0, own = 0;
    for (int it = 0; it < warmup + iters; it++) {
        if (it == warmup) {
            HG_CHECK(cuStreamSynchronize(s));
            t0 = clock_us(CLOCK_MONOTONIC);
            c0 = clock_us(CLOCK_THREAD_CPUTIME_ID);
        }
        double s0 = clock_us(CLOCK_MONOTONIC);
        hg_begin(&h);
        for (int k = 0; k < kernels; k++) {
            float a = k % 10 == 0 ? 0.5f + 0.0625f * (float)(it % 8) : 0.99f;
            float b = 0.001f * (float)(k % 13);
            struct hg_args args = {0};
            HG_ARG(&args, p); HG_ARG(&args, a); HG_ARG(&args, b); HG_ARG(&args, n);
            double w0 = work ? clock_us(CLOCK_MONOTONIC) : 0;
            mb_host_work(work, &opt);
            if (work && it >= warmup)
                own += clock_us(CLOCK_MONOTONIC) - w0;
            hg_launch(&h, f, (unsigned)blocks, BLOCK, &args);
            if (opt.syncs && (k + 1) % (kernels / opt.syncs) == 0 && k + 1 < kernels)
                HG_CHECK(cuStreamSynchronize(s));
        }
        hg_end(&h);
        if (it >= warmup)
            submit += clock_us(CLOCK_MONOTONIC) - s0;
        if (sync_each)
            HG_CHECK(cuStreamSynchronize(s));
    }
    HG_CHECK(cuStreamSynchronize(s));
    double iter_us = (clock_us(CLOCK_MONOTONIC) - t0) / iters;
    double cpu_us = (clock_us(CLOCK_THREAD_CPUTIME_ID) - c0) / iters;

    float *host = malloc((size_t)n * sizeof(float));
    if (!host)
        return 1;
    HG_CHECK(cuMemcpyDtoH(host, p, (size_t)n * sizeof(float)));
    printf("checksum %016llx\n", (unsigned long long)wl_fnv1a(WL_FNV_OFFSET, host, (size_t)n * sizeof(float)));
    printf("iter_us %.3f\n", iter_us);
    printf("cpu_us %.3f\n", cpu_us);  /* the submitting thread's CPU time per iteration */
    printf("submit_us %.3f\n", submit / iters);  /* wall time of the launch loop, its closing sync excluded */
    if (work)
        printf("host_us %.3f\n", own / iters);  /* of it, the program's own work between launches */
    free(host);
    free(work);
    hg_destroy(&h);
    return 0;
}
