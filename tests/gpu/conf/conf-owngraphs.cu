// conf-owngraphs: the program makes CUDA graphs itself: a stream capture (global mode) of a kernel
// sequence, re-captured and applied with cudaGraphExecUpdate every 3rd iteration, and an explicit
// graph whose first node gets a new argument through cudaGraphExecKernelNodeSetParams each
// iteration; eager kernels run between the graph launches on the same stream. A shim that defers
// work into the program's capture, keeps it across a graph launch, or fails the capture in global
// mode changes the checksum or the exit status.
#include "conf_lib.h"

enum { N = 4096, ITERS = 40 };

struct bufs {
    float *x, *y;
    unsigned long long *acc;
};

// The captured sequence; `k` varies between re-captures.
static void sequence(cudaStream_t s, const bufs &b, float k)
{
    LAUNCH(conf_scale, N, s, b.x, k, N);
    LAUNCH(conf_chain, 0, s, b.acc, 0x100ULL);
    LAUNCH(conf_axpy, N, s, b.y, b.x, 0.25f, N);
    LAUNCH(conf_squash, N, s, b.y, N);
    LAUNCH(conf_chain, 0, s, b.acc, 0x101ULL);
}

static cudaGraph_t capture(cudaStream_t s, const bufs &b, float k)
{
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    sequence(s, b, k);
    CK(cudaStreamEndCapture(s, &g));
    return g;
}

static cudaKernelNodeParams node(void *fn, int n, void **args)
{
    cudaKernelNodeParams p = {};
    p.func = fn;
    p.gridDim = dim3(conf_grid(n));
    p.blockDim = dim3(n > 0 ? CONF_THREADS : 1);
    p.kernelParams = args;
    return p;
}

int main()
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    bufs b;
    CK(cudaMalloc(&b.x, N * sizeof(float)));
    CK(cudaMalloc(&b.y, N * sizeof(float)));
    CK(cudaMalloc(&b.acc, sizeof *b.acc));
    CK(cudaMemsetAsync(b.acc, 0, sizeof *b.acc, s));
    LAUNCH(conf_init, N, s, b.x, N, 21ULL);
    LAUNCH(conf_init, N, s, b.y, N, 22ULL);

    sequence(s, b, 1.0f); // warm-up before capture, as frameworks do: kernels loaded, not captured
    cudaGraph_t captured = capture(s, b, 0.5f);
    cudaGraphExec_t captured_exec;
    CK(cudaGraphInstantiate(&captured_exec, captured, 0));

    // Explicit graph: mix(y, step) -> chain(acc, tag) -> scale(x, 0.75)
    int n = N;
    unsigned long long step = 0, tag = 0x200ULL;
    float k = 0.75f;
    void *mix_args[] = { &b.y, &n, &step }, *chain_args[] = { &b.acc, &tag }, *scale_args[] = { &b.x, &k, &n };
    cudaGraph_t built;
    cudaGraphNode_t mix_node, chain_node, scale_node;
    CK(cudaGraphCreate(&built, 0));
    cudaKernelNodeParams mix_p = node((void *)conf_step, N, mix_args);
    cudaKernelNodeParams chain_p = node((void *)conf_chain, 0, chain_args);
    cudaKernelNodeParams scale_p = node((void *)conf_scale, N, scale_args);
    CK(cudaGraphAddKernelNode(&mix_node, built, NULL, 0, &mix_p));
    CK(cudaGraphAddKernelNode(&chain_node, built, &mix_node, 1, &chain_p));
    CK(cudaGraphAddKernelNode(&scale_node, built, &chain_node, 1, &scale_p));
    cudaGraphExec_t built_exec;
    CK(cudaGraphInstantiate(&built_exec, built, 0));

    unsigned long long hash = WL_FNV_OFFSET;
    for (int it = 0; it < ITERS; it++) {
        unsigned long long t = (unsigned long long)it << 8;
        LAUNCH(conf_step, N, s, b.x, N, (unsigned long long)it);
        LAUNCH(conf_chain, 0, s, b.acc, t++);
        if (it % 3 == 2) { // re-capture with another factor; the executable graph is updated in place
            cudaGraph_t again = capture(s, b, 0.5f + 0.125f * (float)(it % 4));
            cudaGraphExecUpdateResultInfo info;
            CK(cudaGraphExecUpdate(captured_exec, again, &info));
            CK(cudaGraphDestroy(again));
        }
        CK(cudaGraphLaunch(captured_exec, s));
        LAUNCH(conf_axpy, N, s, b.x, b.y, 0.1f, N);
        LAUNCH(conf_chain, 0, s, b.acc, t++);
        step = (unsigned long long)it * 3 + 1; // read by the call below, not at launch
        CK(cudaGraphExecKernelNodeSetParams(built_exec, mix_node, &mix_p));
        CK(cudaGraphLaunch(built_exec, s));
        LAUNCH(conf_squash, N, s, b.x, N);
        for (int j = 0; j < 3; j++)
            LAUNCH(conf_chain, 0, s, b.acc, t++);
        CK(cudaGraphLaunch(captured_exec, s)); // the same graph twice in one iteration
        LAUNCH(conf_scale, N, s, b.y, 0.9f, N);
        if (it % 10 == 9 || it == ITERS - 1) {
            hash = conf_hash_stream(hash, b.x, N * sizeof(float), s);
            hash = conf_hash_stream(hash, b.y, N * sizeof(float), s);
            hash = conf_hash_stream(hash, b.acc, sizeof *b.acc, s);
            conf_print(hash);
        }
    }
    CK(cudaGraphExecDestroy(built_exec));
    CK(cudaGraphExecDestroy(captured_exec));
    CK(cudaGraphDestroy(built));
    CK(cudaGraphDestroy(captured));
    CK(cudaStreamDestroy(s));
    return 0;
}
