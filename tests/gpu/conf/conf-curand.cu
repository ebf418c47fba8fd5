// conf-curand: one Philox generator (fixed seed, on a created stream) fills device buffers with
// uniform and normal numbers every iteration, consumed by kernels. cuRAND advances its offset on
// the host, so each generate launch carries new arguments: a shim that replays a stale offset
// repeats random numbers, and one that reorders generate and consumer changes the checksum.
#include "conf_lib.h"
#include <curand.h>

enum { N = 1 << 16, ITERS = 40 };

// x = x * 0.9 + u * z / 10: consumes both draws of this iteration.
__global__ void consume(float *x, const float *u, const float *z, int n)
{
    GRID_STRIDE(i, n) x[i] = x[i] * 0.9f + u[i] * z[i] * 0.1f;
}

// Per element: how many of its uniforms fell below a threshold so far (no atomics).
__global__ void below(unsigned *count, const float *u, int n, float t)
{
    GRID_STRIDE(i, n) count[i] += u[i] < t ? 1u : 0u;
}

int main()
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *u, *z, *u2, *x;
    unsigned *count;
    unsigned long long *chain;
    CK(cudaMalloc(&u, N * sizeof *u));
    CK(cudaMalloc(&z, N * sizeof *z));
    CK(cudaMalloc(&u2, N / 2 * sizeof *u2));
    CK(cudaMalloc(&x, N * sizeof *x));
    CK(cudaMalloc(&count, N / 2 * sizeof *count));
    CK(cudaMalloc(&chain, sizeof *chain));
    CK(cudaMemsetAsync(x, 0, N * sizeof *x, s));
    CK(cudaMemsetAsync(count, 0, N / 2 * sizeof *count, s));
    CK(cudaMemsetAsync(chain, 0, sizeof *chain, s));

    curandGenerator_t g;
    CKS(curandCreateGenerator(&g, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    CKS(curandSetPseudoRandomGeneratorSeed(g, 1234ULL));
    CKS(curandSetStream(g, s));

    unsigned long long hash = WL_FNV_OFFSET;
    for (int it = 0; it < ITERS; it++) {
        unsigned long long tag = (unsigned long long)it << 8;
        CKS(curandGenerateUniform(g, u, N));
        LAUNCH(conf_chain, 0, s, chain, tag++);
        CKS(curandGenerateNormal(g, z, N, 0.0f, 1.0f)); // N even: Box-Muller makes pairs
        LAUNCH(conf_chain, 0, s, chain, tag++);
        LAUNCH(consume, N, s, x, u, z, N);
        LAUNCH(conf_squash, N, s, x, N);
        CKS(curandGenerateUniform(g, u2, N / 2)); // another size: another offset step
        LAUNCH(below, N / 2, s, count, u2, N / 2, 0.25f + 0.05f * (float)(it % 4));
        LAUNCH(conf_axpy, N / 2, s, x, u2, -0.5f, N / 2);
        for (int k = 0; k < 4; k++)
            LAUNCH(conf_chain, 0, s, chain, tag++);
        if (it % 10 == 9 || it == ITERS - 1) {
            hash = conf_hash_stream(hash, x, N * sizeof *x, s);
            hash = conf_hash_stream(hash, count, N / 2 * sizeof *count, s);
            hash = conf_hash_stream(hash, z, N * sizeof *z, s);
            hash = conf_hash_stream(hash, chain, sizeof *chain, s);
            conf_print(hash);
        }
    }
    CKS(curandDestroyGenerator(g));
    CK(cudaStreamDestroy(s));
    return 0;
}
