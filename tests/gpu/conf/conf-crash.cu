// conf-crash: 20 iterations with a flushed checksum line every 5, then abort() in the middle of
// iteration 21 with kernels launched and not synchronised. Must exit 134 (SIGABRT) with the same
// checksum lines eager and under the shim: a shim that hangs, exits cleanly, crashes differently
// in its own handlers, or changed earlier results fails the check.
#include "conf_lib.h"
#include <sys/resource.h>

enum { N = 4096, ITERS = 20 };

static void step(cudaStream_t s, float *x, float *y, unsigned long long *acc, int it)
{
    unsigned long long t = (unsigned long long)it << 8;
    LAUNCH(conf_step, N, s, x, N, (unsigned long long)it);
    LAUNCH(conf_chain, 0, s, acc, t++);
    LAUNCH(conf_scale, N, s, x, 0.5f, N);
    LAUNCH(conf_axpy, N, s, y, x, 0.25f, N);
    LAUNCH(conf_squash, N, s, y, N);
    for (int k = 0; k < 4; k++)
        LAUNCH(conf_chain, 0, s, acc, t++);
    LAUNCH(conf_step, N, s, y, N, (unsigned long long)it + 500);
    LAUNCH(conf_chain, 0, s, acc, t++);
}

int main()
{
    // No core file: the exit status is what is tested, not a dump of a large CUDA process.
    struct rlimit no_core = { 0, 0 };
    if (setrlimit(RLIMIT_CORE, &no_core) != 0)
        perror("setrlimit(RLIMIT_CORE)");
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *x, *y;
    unsigned long long *acc;
    CK(cudaMalloc(&x, N * sizeof(float)));
    CK(cudaMalloc(&y, N * sizeof(float)));
    CK(cudaMalloc(&acc, sizeof *acc));
    CK(cudaMemsetAsync(acc, 0, sizeof *acc, s));
    LAUNCH(conf_init, N, s, x, N, 31ULL);
    LAUNCH(conf_init, N, s, y, N, 32ULL);

    unsigned long long hash = WL_FNV_OFFSET;
    for (int it = 0; it < ITERS; it++) {
        step(s, x, y, acc, it);
        hash = conf_hash_stream(hash, acc, sizeof *acc, s); // a sync per iteration: replayed early
        if (it % 5 == 4) {
            hash = conf_hash_stream(hash, y, N * sizeof(float), s);
            conf_print(hash);
        }
    }
    // Iteration 21: half a step in flight, then the program dies.
    LAUNCH(conf_step, N, s, x, N, (unsigned long long)ITERS);
    LAUNCH(conf_chain, 0, s, acc, 0xdeadULL);
    LAUNCH(conf_scale, N, s, x, 0.5f, N);
    fprintf(stderr, "conf-crash: aborting on purpose\n");
    abort();
}
