/* cugraft-demo-work: the main job's workload. Driver API only, so it also runs against the CPU
 * fake driver. One iteration = ~300 small launches (a by-value step counter, a buffer pointer
 * that alternates every iteration), one cuBLASLt matmul (dlopen'ed, optional), one host read. */
#include "checksum.h"
#include "hand_graph.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const char demo_kernels_ptx[];

enum { N = 64 * 256, MIX_ROUNDS = 59, BLOCK = 256, WS_BYTES = 4 << 20 };

static CUfunction k_chain, k_fill, k_axpy, k_scale, k_mix;

static unsigned grid_for(int n) { return (unsigned)((n + BLOCK - 1) / BLOCK); }

static void chain(struct hand_graph *h, CUdeviceptr acc, unsigned long long tag)
{
    struct hg_args a = {0};
    HG_ARG(&a, acc); HG_ARG(&a, tag);
    hg_launch(h, k_chain, 1, 1, &a);
}

static void fill(struct hand_graph *h, CUdeviceptr p, float v, int n)
{
    struct hg_args a = {0};
    HG_ARG(&a, p); HG_ARG(&a, v); HG_ARG(&a, n);
    hg_launch(h, k_fill, grid_for(n), BLOCK, &a);
}

static void axpy(struct hand_graph *h, CUdeviceptr y, CUdeviceptr x, float alpha, int n)
{
    struct hg_args a = {0};
    HG_ARG(&a, y); HG_ARG(&a, x); HG_ARG(&a, alpha); HG_ARG(&a, n);
    hg_launch(h, k_axpy, grid_for(n), BLOCK, &a);
}

static void scale(struct hand_graph *h, CUdeviceptr p, float alpha, int n)
{
    struct hg_args a = {0};
    HG_ARG(&a, p); HG_ARG(&a, alpha); HG_ARG(&a, n);
    hg_launch(h, k_scale, grid_for(n), BLOCK, &a);
}

static void step_mix(struct hand_graph *h, CUdeviceptr p, int n, unsigned long long step)
{
    struct hg_args a = {0};
    HG_ARG(&a, p); HG_ARG(&a, n); HG_ARG(&a, step);
    hg_launch(h, k_mix, grid_for(n), BLOCK, &a);
}

/* cuBLASLt, loaded at run time so the program still runs where there is none (CPU fake). */
struct blas {
    void *lib;
    __typeof__(&cublasLtMatmul) matmul;
    cublasLtHandle_t handle;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t lw, ly, lc;
    cublasLtMatmulHeuristicResult_t algo;
    CUdeviceptr workspace;
};

/* Resolve NAME from b->lib into a pointer typed like the header's prototype. */
#define BLAS_SYM(b, var, name) \
    ((var) = (__typeof__(&name))dlsym((b)->lib, #name)) == NULL

/* C[64,256] = Y[64,256] * W[256,256], row-major fp32. cuBLASLt is column-major, so it computes
 * C^T = W^T * Y^T on the same bytes. Returns a reason string, or NULL when ready. */
static const char *blas_open(struct blas *b)
{
    __typeof__(&cublasLtCreate) create;
    __typeof__(&cublasLtMatmulDescCreate) desc_create;
    __typeof__(&cublasLtMatrixLayoutCreate) layout_create;
    __typeof__(&cublasLtMatmulPreferenceCreate) pref_create;
    __typeof__(&cublasLtMatmulPreferenceSetAttribute) pref_set;
    __typeof__(&cublasLtMatmulAlgoGetHeuristic) heuristic;

    b->lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!b->lib)
        return "libcublasLt.so.13 not found";
    if (BLAS_SYM(b, create, cublasLtCreate) || BLAS_SYM(b, desc_create, cublasLtMatmulDescCreate) ||
        BLAS_SYM(b, layout_create, cublasLtMatrixLayoutCreate) ||
        BLAS_SYM(b, pref_create, cublasLtMatmulPreferenceCreate) ||
        BLAS_SYM(b, pref_set, cublasLtMatmulPreferenceSetAttribute) ||
        BLAS_SYM(b, heuristic, cublasLtMatmulAlgoGetHeuristic) || BLAS_SYM(b, b->matmul, cublasLtMatmul))
        return "libcublasLt.so.13 lacks an expected symbol";
    if (create(&b->handle) != CUBLAS_STATUS_SUCCESS)
        return "cublasLtCreate failed";
    if (desc_create(&b->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        layout_create(&b->lw, CUDA_R_32F, 256, 256, 256) != CUBLAS_STATUS_SUCCESS ||
        layout_create(&b->ly, CUDA_R_32F, 256, 64, 256) != CUBLAS_STATUS_SUCCESS ||
        layout_create(&b->lc, CUDA_R_32F, 256, 64, 256) != CUBLAS_STATUS_SUCCESS)
        return "cuBLASLt descriptor creation failed";
    cublasLtMatmulPreference_t pref;
    uint64_t ws = WS_BYTES;
    uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;   /* no split-K: bitwise repeatable */
    int found = 0;
    if (pref_create(&pref) != CUBLAS_STATUS_SUCCESS ||
        pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) != CUBLAS_STATUS_SUCCESS ||
        pref_set(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_reduction,
                 sizeof no_reduction) != CUBLAS_STATUS_SUCCESS ||
        heuristic(b->handle, b->desc, b->lw, b->ly, b->lc, b->lc, pref, 1, &b->algo, &found) !=
            CUBLAS_STATUS_SUCCESS || found < 1)
        return "cuBLASLt found no algorithm";
    HG_CHECK(cuMemAlloc(&b->workspace, WS_BYTES));
    return NULL;
}

static void blas_matmul(struct blas *b, CUstream s, CUdeviceptr c, CUdeviceptr y, CUdeviceptr w)
{
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = b->matmul(b->handle, b->desc, &one, (const void *)w, b->lw, (const void *)y,
                                  b->ly, &zero, (const void *)c, b->lc, (void *)c, b->lc,
                                  &b->algo.algo, (void *)b->workspace, WS_BYTES, (cudaStream_t)s);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "error: cublasLtMatmul failed (%d)\n", (int)st);
        exit(1);
    }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [--iters N] [--warmup N] [--graph] [--no-blas]\n", prog);
    exit(2);
}

int main(int argc, char **argv)
{
    int iters = 200, warmup = 10, use_graph = 0, use_blas = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--graph"))
            use_graph = 1;
        else if (!strcmp(argv[i], "--no-blas"))
            use_blas = 0;
        else
            usage(argv[0]);
    }
    if (iters < 1 || warmup < 1)
        usage(argv[0]);

    CUstream s;
    CUmodule mod = hg_open(demo_kernels_ptx);
    HG_CHECK(cuModuleGetFunction(&k_chain, mod, "cg_chain"));
    HG_CHECK(cuModuleGetFunction(&k_fill, mod, "cg_fill_f32"));
    HG_CHECK(cuModuleGetFunction(&k_axpy, mod, "cg_axpy_f32"));
    HG_CHECK(cuModuleGetFunction(&k_scale, mod, "cg_scale_f32"));
    HG_CHECK(cuModuleGetFunction(&k_mix, mod, "cg_step_mix"));
    /* A blocking stream: the synchronous cuMemcpyDtoH on the legacy stream waits for it. */
    HG_CHECK(cuStreamCreate(&s, CU_STREAM_DEFAULT));

    CUdeviceptr ping[2], y, tmp, w, c, acc;
    HG_CHECK(cuMemAlloc(&ping[0], N * sizeof(float)));
    HG_CHECK(cuMemAlloc(&ping[1], N * sizeof(float)));
    HG_CHECK(cuMemAlloc(&y, N * sizeof(float)));
    HG_CHECK(cuMemAlloc(&tmp, N * sizeof(float)));
    HG_CHECK(cuMemAlloc(&w, 256 * 256 * sizeof(float)));
    HG_CHECK(cuMemAlloc(&c, N * sizeof(float)));
    HG_CHECK(cuMemAlloc(&acc, sizeof(unsigned long long)));

    struct blas blas = {0};
    if (use_blas) {
        const char *why = blas_open(&blas);
        if (why) {
            fprintf(stderr, "note: running without the matmul: %s\n", why);
            use_blas = 0;
        }
    }
    printf("blas %s\n", use_blas ? "cublaslt" : "off");

    /* Deterministic initial state, set up eagerly outside the measured loop. */
    struct hand_graph init;
    hg_init(&init, s, 0);
    fill(&init, ping[0], 0.0f, N);
    fill(&init, ping[1], 0.0f, N);
    fill(&init, y, 0.0f, N);
    step_mix(&init, y, N, 7);
    fill(&init, c, 0.0f, N);
    fill(&init, w, 0.0f, 256 * 256);
    step_mix(&init, w, 256 * 256, 12345);
    scale(&init, w, 1.0f / 256, 256 * 256);
    unsigned long long host_acc = 1;
    HG_CHECK(cuMemcpyHtoD(acc, &host_acc, sizeof host_acc));
    HG_CHECK(cuStreamSynchronize(s));

    struct hand_graph h;
    hg_init(&h, s, use_graph);
    double t0 = 0;
    for (int it = 0; it < warmup + iters; it++) {
        if (it == warmup)
            t0 = now_us();
        CUdeviceptr cur = ping[it & 1], other = ping[(it + 1) & 1];
        hg_begin(&h);
        fill(&h, tmp, 0.25f * (float)(it % 5), N);
        axpy(&h, cur, tmp, 0.01f, N);
        for (int j = 0; j < MIX_ROUNDS; j++) {
            unsigned long long step = (unsigned long long)it * MIX_ROUNDS + j;
            axpy(&h, cur, y, 0.25f, N);
            scale(&h, cur, 0.5f, N);
            step_mix(&h, y, N, step);
            axpy(&h, other, cur, 0.125f, N);
            chain(&h, acc, step);
        }
        if (use_blas && hg_issue_untracked(&h))
            blas_matmul(&blas, s, c, y, w);
        axpy(&h, cur, c, 0.01f, N);
        hg_end(&h);
        /* The host read every iteration (like loss.item()). */
        HG_CHECK(cuMemcpyDtoH(&host_acc, acc, sizeof host_acc));
    }
    double iter_us = (now_us() - t0) / iters;
    HG_CHECK(cuCtxSynchronize());

    static float host[256 * 256];
    uint64_t hash = WL_FNV_OFFSET;
    const CUdeviceptr results[] = {ping[0], ping[1], y, c};
    for (size_t i = 0; i < sizeof results / sizeof results[0]; i++) {
        HG_CHECK(cuMemcpyDtoH(host, results[i], N * sizeof(float)));
        hash = wl_fnv1a(hash, host, N * sizeof(float));
    }
    HG_CHECK(cuMemcpyDtoH(&host_acc, acc, sizeof host_acc));
    if (use_graph)
        fprintf(stderr, "hand-made graph: %.1f node updates per iteration\n",
                (double)h.patched / (warmup + iters > 2 ? warmup + iters - 2 : 1));
    printf("checksum %016llx\n", (unsigned long long)(host_acc + hash));
    printf("iter_us %.3f\n", iter_us);
    hg_destroy(&h);
    return 0;
}
