// conf-host: the host watching the GPU: host functions that log values kernels wrote to mapped
// memory, per-iteration __constant__ uploads, pageable/pinned copies, device printf, and a host
// thread spinning on a flag a kernel sets. A shim that runs a host function before the kernel
// ahead of it, keeps stale constants, or defers without a deadline (spin-timeout) differs or hangs.
#include "conf.h"
#include <chrono>
#include <thread>

enum { N = 1 << 15, BLOCK = 256, GRID = 64, NCOEF = 16 };

__constant__ unsigned coef[NCOEF];

__global__ void apply(unsigned *a, const unsigned *b, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        a[i] = a[i] * coef[i % NCOEF] + b[i];
}

__global__ void publish(const unsigned *a, volatile unsigned *mapped, int at)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *mapped = a[at] ^ coef[at % NCOEF];
}

__global__ void report(const unsigned *a, int it)
{
    if (it % 10 == 0 && blockIdx.x == 0 && threadIdx.x == 0)
        printf("checksum p %d %08x\n", it, a[it]);
}

__global__ void set_flag(volatile unsigned *flag, unsigned v)
{
    *flag = v;
    __threadfence_system();
}

struct host_log {
    volatile unsigned *mapped;   // written by `publish`, read by the host function after it
    std::vector<unsigned> values;
};
static void CUDART_CB log_value(void *arg)
{
    host_log *log = (host_log *)arg;
    unsigned v = *log->mapped;
    log->values.push_back(v);
}

// The flag is set by a kernel that nothing but time (the shim's deferral deadline) submits.
static void spin(volatile unsigned *flag, unsigned want, bool *seen)
{
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (*flag != want)
        if (std::chrono::steady_clock::now() > end)
            return;
    *seen = true;
}

int main(int argc, char **argv)
{
    const int iters = conf_iters(argc, argv, 40);
    setvbuf(stdout, NULL, _IOLBF, 0);   // host lines and device printf lines keep their order
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned *a, *b, *pinned_in, *pinned_out, *mapped;
    CK(cudaMalloc(&a, N * sizeof(unsigned)));
    CK(cudaMalloc(&b, N * sizeof(unsigned)));
    CK(cudaMallocHost(&pinned_in, N * sizeof(unsigned)));
    CK(cudaMallocHost(&pinned_out, N * sizeof(unsigned)));
    CK(cudaHostAlloc(&mapped, 2 * sizeof(unsigned), cudaHostAllocMapped));
    unsigned *mapped_dev;
    CK(cudaHostGetDevicePointer((void **)&mapped_dev, mapped, 0));
    mapped[0] = mapped[1] = 0;
    std::vector<unsigned> pageable_in(N), pageable_out(N);
    host_log log = {mapped, {}};
    log.values.reserve(2 * iters);

    uint64_t h = WL_FNV_OFFSET;
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < N; i++) {
            pageable_in[i] = (unsigned)(i * 2654435761u) ^ (unsigned)it;
            pinned_in[i] = (unsigned)(i + 7 * it);
        }
        unsigned c[NCOEF];
        for (int j = 0; j < NCOEF; j++)
            c[j] = 2u * (unsigned)(j + it) + 1u;
        CK(cudaMemcpyAsync(a, pageable_in.data(), N * sizeof(unsigned), cudaMemcpyHostToDevice, s));
        CK(cudaMemcpyAsync(b, pinned_in, N * sizeof(unsigned), cudaMemcpyHostToDevice, s));
        CK(cudaMemcpyToSymbolAsync(coef, c, sizeof c, 0, cudaMemcpyHostToDevice, s));
        apply<<<GRID, BLOCK, 0, s>>>(a, b, N);
        conf_mix<<<GRID, BLOCK, 0, s>>>(a, (unsigned)it, N);
        apply<<<GRID, BLOCK, 0, s>>>(b, a, N);
        publish<<<1, 32, 0, s>>>(a, mapped_dev, it % N);
        CK(cudaLaunchHostFunc(s, log_value, &log));
        conf_fold<<<GRID, BLOCK, 0, s>>>(a, b, N);
        conf_mix<<<GRID, BLOCK, 0, s>>>(b, 3u * (unsigned)it, N);
        publish<<<1, 32, 0, s>>>(b, mapped_dev, (it * 31) % N);
        CK(cudaLaunchHostFunc(s, log_value, &log));
        report<<<GRID, BLOCK, 0, s>>>(a, it);
        conf_mix<<<GRID, BLOCK, 0, s>>>(a, 5u * (unsigned)it, N);
        set_flag<<<1, 1, 0, s>>>(mapped_dev + 1, (unsigned)it + 1);
        conf_fold<<<GRID, BLOCK, 0, s>>>(b, a, N);
        conf_mix<<<GRID, BLOCK, 0, s>>>(a, 7u * (unsigned)it, N);
        CK(cudaGetLastError());
        bool seen = false;
        std::thread spinner(spin, mapped + 1, (unsigned)it + 1, &seen);
        spinner.join();   // no CUDA call between the launches and here
        if (!seen) {
            printf("checksum spin-timeout %d\n", it);
            return 1;
        }
        CK(cudaMemcpyAsync(pinned_out, a, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
        CK(cudaMemcpyAsync(pageable_out.data(), b, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
        CK(cudaDeviceSynchronize());
        fflush(stdout);
        h = wl_fnv1a(h, pinned_out, N * sizeof(unsigned));
        h = wl_fnv1a(h, pageable_out.data(), N * sizeof(unsigned));
        if (it % 10 == 0 || it == iters - 1)
            conf_print(h);
    }
    CONF_REQUIRE(log.values.size() == 2 * (size_t)iters);
    printf("checksum log %016llx\n", (unsigned long long)wl_fnv1a(WL_FNV_OFFSET, log.values.data(), log.values.size() * sizeof(unsigned)));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFreeHost(pinned_in));
    CK(cudaFreeHost(pinned_out));
    CK(cudaFreeHost(mapped));
    CK(cudaStreamDestroy(s));
    return 0;
}
