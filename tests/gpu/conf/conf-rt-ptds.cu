// conf-rt-ptds (built with --default-stream per-thread): stream 0 is each host thread's own
// per-thread default stream (the driver's _ptsz entry points); one thread also alternates with
// cudaStreamLegacy, ordered only by the implicit legacy <-> per-thread synchronisation. A shim that
// maps stream 0 to one shared stream, or reorders across that implicit sync, changes the bytes.
// Every iteration also naps twice for longer than a deferring shim's default bound, while its
// deferred work is mid-chunk: once right after a ~6 ms kernel reached the GPU (work another
// thread then submits for this stream must wait for it), once right after such a kernel was
// deferred (this thread's next kernel, which reads its output, must wait for it).
#include "conf.h"
#include <chrono>
#include <thread>

enum { N = 1 << 16, BLOCK = 256, NWORKERS = 3, MAXMARKS = 64, SLOW_ROUNDS = 25000 };

struct worker {
    int id, iters;
    bool use_legacy;
    uint64_t marks[MAXMARKS];   // running checksum every 10 iterations, printed by main in order
    int nmarks;
};

// conf_mix applied `rounds` times: a kernel that runs for milliseconds on a small grid.
__global__ void slow_mix(unsigned *x, unsigned salt, int n, int rounds)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned v = x[i];
        for (int r = 0; r < rounds; r++) {
            v = (v ^ salt) * 0x9e3779b1u;
            v ^= v >> 15;
        }
        x[i] = v;
    }
}

static void nap() { std::this_thread::sleep_for(std::chrono::milliseconds(4)); }

static unsigned salt(int id, int it, int k) { return 0x2545f491u * (unsigned)(id * 4096 + it * 32 + k) + 0x9e37u; }

static void run(worker *w)
{
    unsigned *x, *y;
    CK(cudaMalloc(&x, N * sizeof(unsigned)));
    CK(cudaMalloc(&y, N * sizeof(unsigned)));
    CK(cudaMemsetAsync(x, 0x11 * (w->id + 1), N * sizeof(unsigned), 0));
    CK(cudaMemsetAsync(y, 0x5a, N * sizeof(unsigned), 0));
    const int grid = 32 * (w->id + 1);  // other shapes per thread: other signatures per stream
    cudaEvent_t mark;
    CK(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming));
    uint64_t h = WL_FNV_OFFSET;
    w->nmarks = 0;
    for (int it = 0; it < w->iters; it++) {
        for (int k = 0; k < 4; k++)
            conf_mix<<<grid, BLOCK>>>(x, salt(w->id, it, k), N);    // per-thread default stream
        conf_fold<<<grid, BLOCK, 0, 0>>>(y, x, N);
        conf_mix<<<grid, BLOCK, 0, cudaStreamPerThread>>>(y, salt(w->id, it, 4), N);
        if (w->use_legacy) {
            // Legacy waits for this thread's stream 0 work, and stream 0 waits for it in turn.
            conf_fold<<<grid, BLOCK, 0, cudaStreamLegacy>>>(x, y, N);
            conf_mix<<<grid, BLOCK, 0, cudaStreamLegacy>>>(x, salt(w->id, it, 5), N);
        }
        conf_fold<<<grid, BLOCK>>>(y, x, N);
        for (int k = 6; k < 10; k++)
            conf_mix<<<grid, BLOCK>>>(k % 2 ? x : y, salt(w->id, it, k), N);
        slow_mix<<<8, BLOCK>>>(x, salt(w->id, it, 10), N, SLOW_ROUNDS);
        CK(cudaEventRecord(mark, 0));   // a boundary: the slow kernel reaches the GPU
        conf_mix<<<grid, BLOCK>>>(x, salt(w->id, it, 11), N);
        conf_mix<<<grid, BLOCK>>>(y, salt(w->id, it, 12), N);
        nap();
        slow_mix<<<8, BLOCK>>>(y, salt(w->id, it, 13), N, SLOW_ROUNDS);
        conf_mix<<<grid, BLOCK>>>(x, salt(w->id, it, 14), N);
        nap();
        conf_fold<<<grid, BLOCK>>>(x, y, N);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(0));
        if (it % 10 == 0 || it == w->iters - 1) {
            h = conf_hash_dev(h, x, N * sizeof(unsigned));
            h = conf_hash_dev(h, y, N * sizeof(unsigned));
            if (w->nmarks < MAXMARKS)
                w->marks[w->nmarks++] = h;
        }
    }
    CK(cudaEventDestroy(mark));
    CK(cudaFree(x));
    CK(cudaFree(y));
}

int main(int argc, char **argv)
{
    const int iters = conf_iters(argc, argv, 40);
    CK(cudaFree(0));   // initialise before the threads start, so they race on launches only
    static worker w[NWORKERS];
    for (int i = 0; i < NWORKERS; i++)
        w[i] = worker{i, iters, i == 2, {}, 0};
    std::thread t1(run, &w[1]), t2(run, &w[2]);
    run(&w[0]);   // the main thread's per-thread default stream
    t1.join();
    t2.join();
    for (int i = 0; i < NWORKERS; i++)
        for (int m = 0; m < w[i].nmarks; m++)
            printf("checksum %d %016llx\n", i, (unsigned long long)w[i].marks[m]);
    return 0;
}
