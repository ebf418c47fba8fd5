// conf-events: three non-blocking streams ordered only by cudaEventRecord/cudaStreamWaitEvent, a
// timed block between two events, and an event polled with cudaEventQuery by another thread while
// the main thread waits for that thread. A shim that defers past a record/wait, or leaves work
// deferred while another thread queries the event, reorders the streams or never finishes.
#include "conf.h"
#include <atomic>
#include <chrono>
#include <thread>

enum { N = 1 << 16, BLOCK = 256, GRID = 128 };

// Fixed work per thread so that the timed block surely takes measurable time.
__global__ void churn(unsigned *x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned v = x[i];
        for (int k = 0; k < 2000; k++)
            v = v * 1664525u + 1013904223u;
        x[i] = v;
    }
}

static std::atomic<int> armed{0}, polled{0};   // iteration + 1 the poller watches / has seen
static cudaEvent_t polled_event;

static void poller(int iters)
{
    for (int it = 1; it <= iters; it++) {
        while (armed.load() < it)
            std::this_thread::yield();
        cudaError_t e;
        while ((e = cudaEventQuery(polled_event)) == cudaErrorNotReady)
            std::this_thread::yield();
        CK(e);
        polled.store(it);
    }
}

static unsigned salt(int it, int k) { return 0x85ebca6bu * (unsigned)(it * 8 + k + 1); }

int main(int argc, char **argv)
{
    const int iters = conf_iters(argc, argv, 40);
    cudaStream_t s[3];
    cudaEvent_t e[3], t0, t1;
    for (int i = 0; i < 3; i++) {
        CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&e[i], cudaEventDisableTiming));
    }
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    CK(cudaEventCreateWithFlags(&polled_event, cudaEventDisableTiming));
    unsigned *a, *b, *c, *d;
    CK(cudaMalloc(&a, N * sizeof(unsigned)));
    CK(cudaMalloc(&b, N * sizeof(unsigned)));
    CK(cudaMalloc(&c, N * sizeof(unsigned)));
    CK(cudaMalloc(&d, N * sizeof(unsigned)));
    CK(cudaMemset(a, 1, N * sizeof(unsigned)));
    CK(cudaMemset(b, 2, N * sizeof(unsigned)));
    CK(cudaMemset(c, 3, N * sizeof(unsigned)));
    CK(cudaMemset(d, 4, N * sizeof(unsigned)));
    CK(cudaDeviceSynchronize());

    std::thread poll_thread(poller, iters);
    uint64_t h = WL_FNV_OFFSET;
    bool elapsed_positive = true;
    for (int it = 0; it < iters; it++) {
        // s0 writes a; s1 reads it after e0; s2 reads b after e1; s0 reads c after e2.
        conf_mix<<<GRID, BLOCK, 0, s[0]>>>(a, salt(it, 0), N);
        conf_mix<<<GRID, BLOCK, 0, s[0]>>>(a, salt(it, 1), N);
        CK(cudaEventRecord(e[0], s[0]));
        CK(cudaStreamWaitEvent(s[1], e[0], 0));
        conf_fold<<<GRID, BLOCK, 0, s[1]>>>(b, a, N);
        conf_mix<<<GRID, BLOCK, 0, s[1]>>>(b, salt(it, 2), N);
        CK(cudaEventRecord(e[1], s[1]));
        CK(cudaStreamWaitEvent(s[2], e[1], 0));
        conf_fold<<<GRID, BLOCK, 0, s[2]>>>(c, b, N);
        conf_mix<<<GRID, BLOCK, 0, s[2]>>>(c, salt(it, 3), N);
        CK(cudaEventRecord(e[2], s[2]));
        // s1 goes on with d while the others run; the poller watches this part.
        conf_mix<<<GRID, BLOCK, 0, s[1]>>>(d, salt(it, 4), N);
        conf_mix<<<GRID, BLOCK, 0, s[1]>>>(d, salt(it, 5), N);
        CK(cudaEventRecord(polled_event, s[1]));
        armed.store(it + 1);
        // s0 may overwrite a only after s1 read it (e2 follows e1 follows that read).
        CK(cudaStreamWaitEvent(s[0], e[2], 0));
        conf_fold<<<GRID, BLOCK, 0, s[0]>>>(a, c, N);
        CK(cudaEventRecord(t0, s[0]));
        for (int k = 0; k < 3; k++)
            churn<<<GRID, BLOCK, 0, s[0]>>>(a, N);
        CK(cudaEventRecord(t1, s[0]));
        CK(cudaGetLastError());
        auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (polled.load() < it + 1) {
            if (std::chrono::steady_clock::now() > end) {
                printf("checksum poll-timeout %d\n", it);
                fflush(stdout);
                exit(1);   // the poller still waits: no return through its std::thread
            }
            std::this_thread::yield();
        }
        CK(cudaEventSynchronize(t1));
        float ms;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        elapsed_positive = elapsed_positive && ms > 0.0f;
        CK(cudaDeviceSynchronize());
        if (it % 10 == 0 || it == iters - 1) {
            h = conf_hash_dev(h, a, N * sizeof(unsigned));
            h = conf_hash_dev(h, b, N * sizeof(unsigned));
            h = conf_hash_dev(h, c, N * sizeof(unsigned));
            h = conf_hash_dev(h, d, N * sizeof(unsigned));
            conf_print(h);
        }
    }
    poll_thread.join();
    printf("checksum elapsed-positive %d\n", elapsed_positive ? 1 : 0);
    for (int i = 0; i < 3; i++) {
        CK(cudaStreamDestroy(s[i]));
        CK(cudaEventDestroy(e[i]));
    }
    CK(cudaEventDestroy(t0));
    CK(cudaEventDestroy(t1));
    CK(cudaEventDestroy(polled_event));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    CK(cudaFree(d));
    return 0;
}
