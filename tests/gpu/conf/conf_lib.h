// What the library-family GPU conformance programs add to conf.h: checked library status codes,
// a checked grid-stride launch, and small float kernels to put between library calls.
#pragma once
#include "conf.h"

// cuFFT and cuRAND have no status strings; 0 means success in every library's status enum.
#define CKS(call) conf_check_status((int)(call), #call, __FILE__, __LINE__)
static void conf_check_status(int st, const char *what, const char *file, int line)
{
    if (st == 0)
        return;
    fprintf(stderr, "%s:%d: %s failed: status %d\n", file, line, what, st);
    exit(1);
}

enum { CONF_THREADS = 256 };
static unsigned conf_grid(int n) { return n > 0 ? (unsigned)(n + CONF_THREADS - 1) / CONF_THREADS : 1; }

// A launch over n elements (one thread when n <= 0), checked like every other call.
#define LAUNCH(kernel, n, stream, ...)                                                         \
    do {                                                                                       \
        kernel<<<conf_grid(n), (n) > 0 ? CONF_THREADS : 1, 0, (stream)>>>(__VA_ARGS__);        \
        CK(cudaGetLastError());                                                                \
    } while (0)

#define GRID_STRIDE(i, n) \
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

__host__ __device__ static inline unsigned long long conf_hash64(unsigned long long z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// p[i] uniform in [-1, 1), a function of (seed, i) only.
__global__ void conf_init(float *p, int n, unsigned long long seed)
{
    GRID_STRIDE(i, n) p[i] = (float)(conf_hash64(seed ^ (unsigned long long)i) >> 40) / 8388608.0f - 1.0f;
}

// New input every step, bounded: p = p/2 + a step-dependent value in [0, 1).
__global__ void conf_step(float *p, int n, unsigned long long step)
{
    GRID_STRIDE(i, n)
        p[i] = p[i] * 0.5f + (float)((step * 2654435761ULL + (unsigned long long)i) % 1000) / 1000.0f;
}

__global__ void conf_scale(float *p, float a, int n)
{
    GRID_STRIDE(i, n) p[i] *= a;
}

__global__ void conf_axpy(float *y, const float *x, float a, int n)
{
    GRID_STRIDE(i, n) y[i] += a * x[i];
}

// Keeps values bounded whatever a library computed.
__global__ void conf_squash(float *p, int n)
{
    GRID_STRIDE(i, n) p[i] = tanhf(p[i]);
}

// Order-sensitive accumulator: a lost, duplicated or reordered launch changes it.
__global__ void conf_chain(unsigned long long *acc, unsigned long long tag)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        *acc = (*acc * 1000003ULL) ^ tag;
}

// Waits for stream s, then folds n bytes of device memory into h.
static unsigned long long conf_hash_stream(unsigned long long h, const void *dev, size_t n, cudaStream_t s)
{
    std::vector<unsigned char> buf(n);
    CK(cudaMemcpyAsync(buf.data(), dev, n, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    return wl_fnv1a(h, buf.data(), n);
}
