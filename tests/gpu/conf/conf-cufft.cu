// conf-cufft: plans made once (cufftPlan1d C2C, cufftPlanMany R2C, cufftSetStream), executed every
// iteration between custom kernels on inputs that change. A shim that replays cuFFT's launches with
// a stale plan work area or argument, or out of order with the kernels around them, changes the
// checksum.
#include "conf_lib.h"
#include <cufft.h>

enum { N = 1024, BATCH = 8, NC = N * BATCH, NR = (N / 2 + 1) * BATCH, ITERS = 40 };

// Scales bin k of each transform by a factor that depends on the step: a moving low-pass.
__global__ void filter(cufftComplex *y, int n, int cut)
{
    GRID_STRIDE(i, n)
    {
        int k = i % N;
        float f = (k < cut || k > N - cut) ? 1.0f : 0.125f;
        y[i].x *= f;
        y[i].y *= f;
    }
}

// acc = acc / 2 + |spectrum| / N
__global__ void magnitude(float *acc, const cufftComplex *r, int n)
{
    GRID_STRIDE(i, n) acc[i] = acc[i] * 0.5f + sqrtf(r[i].x * r[i].x + r[i].y * r[i].y) / (float)N;
}

int main()
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cufftComplex *x, *y, *rf;
    float *r, *acc;
    unsigned long long *chain;
    CK(cudaMalloc(&x, NC * sizeof *x));
    CK(cudaMalloc(&y, NC * sizeof *y));
    CK(cudaMalloc(&rf, NR * sizeof *rf));
    CK(cudaMalloc(&r, NC * sizeof *r));
    CK(cudaMalloc(&acc, NR * sizeof *acc));
    CK(cudaMalloc(&chain, sizeof *chain));
    CK(cudaMemsetAsync(acc, 0, NR * sizeof *acc, s));
    CK(cudaMemsetAsync(chain, 0, sizeof *chain, s));
    LAUNCH(conf_init, 2 * NC, s, (float *)x, 2 * NC, 11ULL);
    LAUNCH(conf_init, NC, s, r, NC, 12ULL);

    cufftHandle c2c, r2c;
    int len[1] = { N };
    CKS(cufftPlan1d(&c2c, N, CUFFT_C2C, BATCH));
    CKS(cufftPlanMany(&r2c, 1, len, NULL, 1, N, NULL, 1, N / 2 + 1, CUFFT_R2C, BATCH));
    CKS(cufftSetStream(c2c, s));
    CKS(cufftSetStream(r2c, s));

    unsigned long long hash = WL_FNV_OFFSET;
    for (int it = 0; it < ITERS; it++) {
        unsigned long long tag = (unsigned long long)it << 8;
        LAUNCH(conf_step, 2 * NC, s, (float *)x, 2 * NC, (unsigned long long)it);
        LAUNCH(conf_step, NC, s, r, NC, (unsigned long long)it + 1000);
        LAUNCH(conf_chain, 0, s, chain, tag++);
        CKS(cufftExecC2C(c2c, x, y, CUFFT_FORWARD));
        LAUNCH(filter, NC, s, y, NC, 16 + (it % 5) * 32);
        LAUNCH(conf_chain, 0, s, chain, tag++);
        CKS(cufftExecC2C(c2c, y, x, CUFFT_INVERSE));
        LAUNCH(conf_scale, 2 * NC, s, (float *)x, 1.0f / N, 2 * NC); // cuFFT does not normalise
        CKS(cufftExecR2C(r2c, r, rf));
        LAUNCH(magnitude, NR, s, acc, rf, NR);
        LAUNCH(conf_axpy, NC, s, r, (const float *)x, 0.25f, NC);
        for (int k = 0; k < 3; k++)
            LAUNCH(conf_chain, 0, s, chain, tag++);
        if (it % 10 == 9 || it == ITERS - 1) {
            hash = conf_hash_stream(hash, x, NC * sizeof *x, s);
            hash = conf_hash_stream(hash, acc, NR * sizeof *acc, s);
            hash = conf_hash_stream(hash, chain, sizeof *chain, s);
            conf_print(hash);
        }
    }
    CKS(cufftDestroy(c2c));
    CKS(cufftDestroy(r2c));
    CK(cudaStreamDestroy(s));
    return 0;
}
