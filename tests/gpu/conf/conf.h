// conf.h: what the runtime conformance programs share: CK() checks every CUDA call, --iters,
// the `checksum <16 hex>` fingerprint (64-bit FNV-1a over result bytes) and two order-sensitive
// integer kernels, so a launch that is lost, repeated or reordered changes the checksum exactly.
#ifndef CONF_H
#define CONF_H
#include <cuda_runtime.h>
#include "checksum.h"   /* bench/workloads: wl_fnv1a, the workloads' fingerprint */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define CK(call) conf_check((call), #call, __FILE__, __LINE__)
static inline void conf_check(cudaError_t e, const char *what, const char *file, int line)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
        exit(1);
    }
}

// A program fails loudly when an expectation about the runtime does not hold.
#define CONF_REQUIRE(cond) ((cond) ? (void)0 : (fprintf(stderr, "%s:%d: %s does not hold\n", __FILE__, __LINE__, #cond), exit(1)))

static inline int conf_iters(int argc, char **argv, int fallback)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--iters") == 0)
            return atoi(argv[i + 1]);
    return fallback;
}


// Folds `len` bytes of device memory into h. Blocking copy on the calling thread's default
// stream: the caller synchronises the streams that wrote `dev` first.
static inline uint64_t conf_hash_dev(uint64_t h, const void *dev, size_t len)
{
    std::vector<unsigned char> host(len);
    CK(cudaMemcpy(host.data(), dev, len, cudaMemcpyDeviceToHost));
    return wl_fnv1a(h, host.data(), len);
}

static inline void conf_print(uint64_t h)
{
    printf("checksum %016llx\n", (unsigned long long)h);
    fflush(stdout);
}

// x = mix(x, salt): not commutative in the salts, so two launches swapped give other bytes.
__global__ void conf_mix(unsigned *x, unsigned salt, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned v = (x[i] ^ salt) * 0x9e3779b1u;
        x[i] = v ^ (v >> 15) ^ (unsigned)i;
    }
}

// dst = dst * 31 + src[rotated]: the dependence of one buffer (one stream) on another.
__global__ void conf_fold(unsigned *dst, const unsigned *src, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[i] = dst[i] * 31u + src[(i + 17) % n];
}
#endif
