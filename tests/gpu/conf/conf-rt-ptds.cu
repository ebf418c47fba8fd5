// conf-rt-ptds (built with --default-stream per-thread): stream 0 is each host thread's own
// per-thread default stream (the driver's _ptsz entry points); one thread also alternates with
// cudaStreamLegacy, ordered only by the implicit legacy <-> per-thread synchronisation. A shim that
// maps stream 0 to one shared stream, or reorders across that implicit sync, changes the bytes.
#include "conf.h"
#include <thread>

enum { N = 1 << 16, BLOCK = 256, NWORKERS = 3, MAXMARKS = 64 };

struct worker {
    int id, iters;
    bool use_legacy;
    uint64_t marks[MAXMARKS];   // running checksum every 10 iterations, printed by main in order
    int nmarks;
};

static unsigned salt(int id, int it, int k) { return 0x2545f491u * (unsigned)(id * 4096 + it * 32 + k) + 0x9e37u; }

static void run(worker *w)
{
    unsigned *x, *y;
    CK(cudaMalloc(&x, N * sizeof(unsigned)));
    CK(cudaMalloc(&y, N * sizeof(unsigned)));
    CK(cudaMemsetAsync(x, 0x11 * (w->id + 1), N * sizeof(unsigned), 0));
    CK(cudaMemsetAsync(y, 0x5a, N * sizeof(unsigned), 0));
    const int grid = 32 * (w->id + 1);  // other shapes per thread: other signatures per stream
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
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(0));
        if (it % 10 == 0 || it == w->iters - 1) {
            h = conf_hash_dev(h, x, N * sizeof(unsigned));
            h = conf_hash_dev(h, y, N * sizeof(unsigned));
            if (w->nmarks < MAXMARKS)
                w->marks[w->nmarks++] = h;
        }
    }
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
