// conf-shapes-rt: runtime-API twin of tests/programs/conf_shapes.c. The same kernel sequence with
// grid and element count changing every 7th iteration (shape buckets) and a different last
// iteration, then a fixed shape with logging kernels every 10th iteration. A shim replaying a
// graph learned for another shape, or a stale template past a divergence, changes the checksum.
#include "conf_lib.h"

enum { N = 1024, ITERS = 50 };

__global__ void fill(float *p, float v, int n)
{
    GRID_STRIDE(i, n) p[i] = v;
}

struct bufs {
    cudaStream_t s;
    float *x, *y;
    unsigned long long *acc, *log;
};

// One training-like step over n elements; `last` swaps the axpy for a fill.
static void step(const bufs &b, int it, int n, bool last)
{
    unsigned long long tag = (unsigned long long)it << 4;
    LAUNCH(conf_step, n, b.s, b.x, n, (unsigned long long)it);
    LAUNCH(conf_scale, n, b.s, b.x, 0.5f, n);
    for (int i = 0; i < 3; i++)
        LAUNCH(conf_chain, 0, b.s, b.acc, tag++);
    if (last)
        LAUNCH(fill, n, b.s, b.y, (float)it, n);
    else
        LAUNCH(conf_axpy, n, b.s, b.y, b.x, 0.25f, n);
    LAUNCH(conf_step, n, b.s, b.x, n, (unsigned long long)it);
    for (int i = 0; i < 3; i++)
        LAUNCH(conf_chain, 0, b.s, b.acc, tag++);
}

// Synchronises and folds the accumulator into h, like reading a loss every step.
static unsigned long long sync_read(const bufs &b, unsigned long long h)
{
    return conf_hash_stream(h, b.acc, sizeof *b.acc, b.s);
}

static unsigned long long print_state(const bufs &b, unsigned long long h)
{
    h = conf_hash_stream(h, b.x, N * sizeof(float), b.s);
    h = conf_hash_stream(h, b.y, N * sizeof(float), b.s);
    h = conf_hash_stream(h, b.log, sizeof *b.log, b.s);
    conf_print(h);
    return h;
}

int main()
{
    bufs b;
    CK(cudaStreamCreateWithFlags(&b.s, cudaStreamNonBlocking));
    CK(cudaMalloc(&b.x, N * sizeof(float)));
    CK(cudaMalloc(&b.y, N * sizeof(float)));
    CK(cudaMalloc(&b.acc, sizeof *b.acc));
    CK(cudaMalloc(&b.log, sizeof *b.log));
    CK(cudaMemsetAsync(b.x, 0, N * sizeof(float), b.s));
    CK(cudaMemsetAsync(b.y, 0, N * sizeof(float), b.s));
    CK(cudaMemsetAsync(b.acc, 0, sizeof *b.acc, b.s));
    CK(cudaMemsetAsync(b.log, 0, sizeof *b.log, b.s));

    unsigned long long h = WL_FNV_OFFSET;
    // Buckets of 256, 512, 1024, 768 elements (1 to 4 blocks), 7 iterations each.
    static const int bucket[] = { 256, 512, 1024, 768 };
    for (int it = 0; it < ITERS; it++) {
        step(b, it, bucket[(it / 7) % 4], it == ITERS - 1);
        h = sync_read(b, h);
        if (it % 10 == 9)
            h = print_state(b, h);
    }
    // Fixed shape; every 10th iteration logs between the halves of the step.
    for (int it = 0; it < ITERS; it++) {
        step(b, it, N, false);
        if (it % 10 == 9) {
            LAUNCH(conf_chain, 0, b.s, b.log, 0xabcULL + (unsigned long long)it);
            LAUNCH(conf_scale, N, b.s, b.y, 10.0f, N);
        }
        step(b, it + 1000, N, false);
        h = sync_read(b, h);
        if (it % 10 == 9)
            h = print_state(b, h);
    }
    h = print_state(b, h);
    CK(cudaStreamDestroy(b.s));
    return 0;
}
