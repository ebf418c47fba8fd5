/* The command line of both micro-benchmarks (mb_driver.c, mb_runtime.cu): one parser, so the
 * driver-API and runtime-API runs of a bench/run row always mean the same work. */
#ifndef BENCH_MB_ARGS_H
#define BENCH_MB_ARGS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mb_args {
    int kernels, blocks, iters, warmup, sync_each, use_graph, ptds;
    int syncs;   /* host syncs inside each iteration, evenly spaced (not with --graph) */
    int host_kib; /* host memory the program's own work touches before each launch (KiB) */
};

static inline struct mb_args mb_parse(int argc, char **argv)
{
    struct mb_args a = { 1000, 16, 100, 5, 0, 0, 0, 0, 0 };
    int ok = 1;
    for (int i = 1; i < argc && ok; i++) {
        if (!strcmp(argv[i], "--kernels") && i + 1 < argc)
            a.kernels = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            a.blocks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            a.iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            a.warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sync"))
            a.sync_each = 1;
        else if (!strcmp(argv[i], "--graph"))
            a.use_graph = 1;
        else if (!strcmp(argv[i], "--ptds"))   /* the per-thread default stream */
            a.ptds = 1;
        else if (!strcmp(argv[i], "--syncs") && i + 1 < argc)
            a.syncs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--host-kib") && i + 1 < argc)
            a.host_kib = atoi(argv[++i]);
        else
            ok = 0;
    }
    if (!ok || a.kernels < 1 || a.blocks < 1 || a.iters < 1 || a.warmup < 1 || a.syncs < 0 ||
        a.syncs > a.kernels || (a.syncs && a.use_graph) || a.host_kib < 0 ||
        a.host_kib > (1 << 20)) {
        fprintf(stderr, "usage: %s [--kernels K] [--blocks B] [--iters N] [--warmup N] [--sync] [--graph] [--ptds]\n"
                        "          [--syncs S (host syncs inside each iteration; not with --graph)]\n"
                        "          [--host-kib K (KiB of host memory written before each launch)]\n",
                argv[0]);
        exit(2);
    }
    return a;
}

/* The program's own work between two launches, as an interpreter's: a write to every cache line
 * of --host-kib KiB of its memory (buf from mb_host_buffer), which moves cugraft's data out of
 * the core's caches as the host work of a PyTorch loop does. */
static inline unsigned char *mb_host_buffer(const struct mb_args *a)
{
    return a->host_kib ? (unsigned char *)calloc((size_t)a->host_kib, 1024) : NULL;
}

static inline void mb_host_work(volatile unsigned char *buf, const struct mb_args *a)
{
    for (size_t i = 0; buf && i < (size_t)a->host_kib * 1024; i += 64)
        buf[i]++;
}
#endif
