// conf-thrust: thrust::transform/sort/reduce under par_nosync.on(stream) with temporary storage
// from cudaMallocAsync/cudaFreeAsync, and cub::DeviceReduce::Sum / DeviceRadixSort::SortKeys with
// temporary storage allocated per iteration. Temporary pointers change from call to call and
// thrust::reduce syncs mid-iteration: a shim replaying stale pointers or reordering around the
// stream-ordered allocator changes the checksum (or faults).
#include "conf_lib.h"
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cstddef>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>
#include <thrust/system_error.h>
#include <thrust/transform.h>

constexpr int N = 1 << 16, ITERS = 40; // typed: CUB wants an integral item count

// Thrust reports failures by throwing: name the statement and exit 1 like every other check.
#define CKT(stmt)                                                                              \
    do {                                                                                       \
        try {                                                                                  \
            stmt;                                                                              \
        } catch (const thrust::system_error &e) {                                              \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #stmt, e.what());    \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

// Thrust's temporary storage from the stream-ordered allocator, freed in stream order.
struct stream_alloc {
    typedef char value_type;
    cudaStream_t s;
    char *allocate(std::ptrdiff_t n)
    {
        void *p;
        CK(cudaMallocAsync(&p, (size_t)n, s));
        return (char *)p;
    }
    void deallocate(char *p, size_t) { CK(cudaFreeAsync(p, s)); }
};

struct scramble {
    unsigned long long step;
    __host__ __device__ unsigned operator()(unsigned k) const { return (unsigned)conf_hash64(k ^ step); }
};

__global__ void gen_keys(unsigned *k, int n, unsigned long long step)
{
    GRID_STRIDE(i, n) k[i] = (unsigned)conf_hash64(step * 0x100000ULL + (unsigned long long)i);
}

// Integer arithmetic throughout: every result is exact whatever order a library sums in.
__global__ void fold(unsigned *acc, const unsigned *a, const unsigned *b, int n)
{
    GRID_STRIDE(i, n) acc[i] = acc[i] * 31u + (a[i] ^ b[i]);
}

int main()
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned *keys, *vals, *sorted, *acc, *sum;
    unsigned long long *chain;
    CK(cudaMalloc(&keys, N * sizeof *keys));
    CK(cudaMalloc(&vals, N * sizeof *vals));
    CK(cudaMalloc(&sorted, N * sizeof *sorted));
    CK(cudaMalloc(&acc, N * sizeof *acc));
    CK(cudaMalloc(&sum, sizeof *sum));
    CK(cudaMalloc(&chain, sizeof *chain));
    CK(cudaMemsetAsync(acc, 0, N * sizeof *acc, s));
    CK(cudaMemsetAsync(chain, 0, sizeof *chain, s));
    stream_alloc alloc{ s };

    unsigned long long hash = WL_FNV_OFFSET;
    for (int it = 0; it < ITERS; it++) {
        unsigned long long tag = (unsigned long long)it << 8;
        auto policy = thrust::cuda::par_nosync(alloc).on(s);
        LAUNCH(gen_keys, N, s, keys, N, (unsigned long long)it);
        LAUNCH(conf_chain, 0, s, chain, tag++);
        CKT(thrust::transform(policy, keys, keys + N, vals, scramble{ (unsigned long long)it * 77 }));
        CKT(thrust::sort(policy, keys, keys + N));
        LAUNCH(conf_chain, 0, s, chain, tag++);
        unsigned total = 0;
        CKT(total = thrust::reduce(policy, vals, vals + N, 0u)); // returns to the host: syncs
        hash = wl_fnv1a(hash, &total, sizeof total);

        size_t bytes = 0;
        void *tmp;
        CK(cub::DeviceReduce::Sum(nullptr, bytes, vals, sum, N, s));
        CK(cudaMallocAsync(&tmp, bytes, s));
        CK(cub::DeviceReduce::Sum(tmp, bytes, vals, sum, N, s));
        CK(cudaFreeAsync(tmp, s));
        bytes = 0;
        CK(cub::DeviceRadixSort::SortKeys(nullptr, bytes, vals, sorted, N, 0, 32, s));
        CK(cudaMallocAsync(&tmp, bytes, s));
        CK(cub::DeviceRadixSort::SortKeys(tmp, bytes, vals, sorted, N, 0, 32, s));
        CK(cudaFreeAsync(tmp, s));
        LAUNCH(fold, N, s, acc, keys, sorted, N);
        for (int k = 0; k < 3; k++)
            LAUNCH(conf_chain, 0, s, chain, tag++);
        if (it % 10 == 9 || it == ITERS - 1) {
            hash = conf_hash_stream(hash, acc, N * sizeof *acc, s);
            hash = conf_hash_stream(hash, sum, sizeof *sum, s);
            hash = conf_hash_stream(hash, chain, sizeof *chain, s);
            conf_print(hash);
        }
    }
    CK(cudaStreamDestroy(s));
    return 0;
}
