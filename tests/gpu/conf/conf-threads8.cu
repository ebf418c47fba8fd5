// conf-threads8: eight host threads, each with its own stream, buffers and launch shapes, all
// launching at once and syncing only their own stream. A shim whose per-stream state, argument
// copies or graph caches leak between threads gives some thread another thread's bytes or hangs.
#include "conf.h"
#include <thread>

enum { N = 1 << 15, BLOCK = 128, THREADS = 8 };

static unsigned salt(int id, int it, int k) { return 0xc2b2ae35u * (unsigned)(id * 100000 + it * 16 + k + 1); }

static void run(int id, int iters, uint64_t *out)
{
    cudaStream_t s;
    unsigned *x, *y;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMallocAsync(&x, N * sizeof(unsigned), s));
    CK(cudaMallocAsync(&y, N * sizeof(unsigned), s));
    CK(cudaMemsetAsync(x, id + 1, N * sizeof(unsigned), s));
    CK(cudaMemsetAsync(y, 0x40 + id, N * sizeof(unsigned), s));
    const int grid = 16 * (id + 1);
    uint64_t h = WL_FNV_OFFSET;
    std::vector<unsigned> host(N);
    for (int it = 0; it < iters; it++) {
        for (int k = 0; k < 5; k++)
            conf_mix<<<grid, BLOCK, 0, s>>>(x, salt(id, it, k), N);
        conf_fold<<<grid, BLOCK, 0, s>>>(y, x, N);
        for (int k = 5; k < 9; k++)
            conf_mix<<<grid / 2 + 1, BLOCK, 0, s>>>(y, salt(id, it, k), N);
        conf_fold<<<grid, BLOCK, 0, s>>>(x, y, N);
        conf_mix<<<grid, BLOCK, 0, s>>>(x, salt(id, it, 9), N);
        conf_mix<<<grid, 2 * BLOCK, 0, s>>>(y, salt(id, it, 10), N);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(s));
        if (it % 10 == 9 || it == iters - 1) {
            CK(cudaMemcpyAsync(host.data(), x, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
            h = wl_fnv1a(h, host.data(), N * sizeof(unsigned));
        }
    }
    CK(cudaMemcpyAsync(host.data(), y, N * sizeof(unsigned), cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    *out = wl_fnv1a(h, host.data(), N * sizeof(unsigned));
    CK(cudaFreeAsync(x, s));
    CK(cudaFreeAsync(y, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaStreamDestroy(s));
}

int main(int argc, char **argv)
{
    const int iters = conf_iters(argc, argv, 40);
    CK(cudaFree(0));
    uint64_t sums[THREADS];
    std::vector<std::thread> pool;
    for (int t = 0; t < THREADS; t++)
        pool.emplace_back(run, t, iters, &sums[t]);
    for (auto &t : pool)
        t.join();
    for (int t = 0; t < THREADS; t++)
        printf("checksum thread %d %016llx\n", t, (unsigned long long)sums[t]);
    return 0;
}
