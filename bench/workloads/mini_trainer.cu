// mini-trainer: a plain CUDA C trainer (runtime API) of a 2-layer MLP 512->1024->512 with
// softmax cross-entropy on synthetic deterministic batches, cuBLASLt matmuls, gradient-norm
// clipping and AdamW over 130 parameter tensors (~270 launches a step, no atomics anywhere).
// --graph: the hand-made reference, one training step captured once and patched per step.
//
// Data parallel (--nccl-id-file F; RANK and WORLD_SIZE from the environment as launchers set
// them): each rank trains on its own batches on GPU LOCAL_RANK (else RANK) modulo the device
// count, averages the gradients with one in-place ncclAllReduce (ncclAvg) before clipping, and
// logs the ranks' mean loss with a second all-reduce. Rank 0 writes the NCCL unique id to F, the
// others wait for it. --shape-change R:S: from step S on, rank R trains on half batches (a
// different last stretch of data). Each batch shape has its own workspace (activations, loss,
// matmul plans), so rank R's loss all-reduce then reads another buffer: its collective differs
// from its earlier steps while the other ranks' repeat.
#include "checksum.h"
#include "capture_rt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vector>
#ifdef WL_NCCL
#include <nccl.h>
#endif

static int B = 64;  // rows per batch (--batch): 64 is launch-bound, 4096 GPU-bound on an H200
enum { I = 512, H = 1024, O = 512, SLICE = 8192, THREADS = 256, WS_BYTES = 4 << 20 };

#define CHECK(call) check_rt((call), #call)
static void check_rt(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "error: %s failed: %s\n", what, cudaGetErrorName(e));
        exit(1);
    }
}
#define CHECK_LT(call) check_lt((call), #call)
static void check_lt(cublasStatus_t st, const char *what)
{
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "error: %s failed: %d\n", what, (int)st);
        exit(1);
    }
}

__device__ __host__ static unsigned long long mix64(unsigned long long z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
__device__ static float uniform_pm1(unsigned long long h) { return (float)(h >> 40) / 8388608.0f - 1.0f; }

// Batch `step` (`rows` of at most B): each row has a label and a noisy input with a bump at the
// label's feature.
__global__ void gen_batch(float *x, int *labels, int rows, int batch, unsigned long long step)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * I)
        return;
    int row = i / I, col = i % I;
    int label = (int)(mix64(step * batch + row) % O);
    x[i] = 0.5f * uniform_pm1(mix64((step << 32) ^ (unsigned long long)i ^ 0x5bd1e995ULL)) + (col == label ? 1.0f : 0.0f);
    if (col == 0)
        labels[row] = label;
}

__global__ void init_uniform(float *p, int n, float bound, unsigned long long seed)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = bound * uniform_pm1(mix64(seed ^ (unsigned long long)i));
}

__device__ static float gelu(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

__global__ void bias_gelu(float *pre, float *out, const float *bias, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols)
        return;
    float v = pre[i] + bias[i % cols];
    pre[i] = v;
    out[i] = gelu(v);
}

__global__ void gelu_backward(const float *dout, const float *pre, float *din, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float x = pre[i], t = tanhf(0.7978845608f * (x + 0.044715f * x * x * x));
    float dt = 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
    din[i] = dout[i] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dt);
}

// Fixed-shape tree reduction in shared memory: the same order every run.
__device__ static float block_reduce(float *sh, float v, bool take_max)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s)
            sh[threadIdx.x] = take_max ? fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]) : sh[threadIdx.x] + sh[threadIdx.x + s];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

// One block per row: adds the bias, writes the row's loss and d(loss)/d(logits) (mean over rows).
__global__ void softmax_xent(float *logits, const float *bias, const int *labels, float *dlogits,
                             float *row_loss, int cols)
{
    __shared__ float sh[THREADS];
    float *l = logits + blockIdx.x * cols;
    float mx = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        l[c] += bias[c];
        mx = fmaxf(mx, l[c]);
    }
    mx = block_reduce(sh, mx, true);
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        sum += expf(l[c] - mx);
    sum = block_reduce(sh, sum, false);
    int label = labels[blockIdx.x];
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        dlogits[blockIdx.x * cols + c] = (expf(l[c] - mx) / sum - (c == label ? 1.0f : 0.0f)) / (float)gridDim.x;
    if (threadIdx.x == 0)
        row_loss[blockIdx.x] = logf(sum) + mx - l[label];
}

__global__ void mean_loss(const float *row_loss, float *loss, int rows)
{
    float s = 0.0f;
    for (int r = 0; r < rows; r++)
        s += row_loss[r];
    *loss = s / (float)rows;
}

__global__ void column_sum(const float *m, float *out, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols)
        return;
    float s = 0.0f;
    for (int r = 0; r < rows; r++)
        s += m[r * cols + c];
    out[c] = s;
}

__global__ void sq_norm(const float *g, int n, float *out)
{
    __shared__ float sh[THREADS];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += g[i] * g[i];
    s = block_reduce(sh, s, false);
    if (threadIdx.x == 0)
        *out = s;
}

__global__ void clip_scale(const float *sq, int n, float *scale, float max_norm)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += sq[i];
    *scale = fminf(1.0f, max_norm / (sqrtf(s) + 1e-6f));
}

__global__ void adamw(float *p, const float *g, float *m, float *v, const float *clip, int n, float lr,
                      float beta1, float beta2, float eps, float wd, float bc1, float bc2)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float gi = g[i] * *clip;
    float mi = beta1 * m[i] + (1.0f - beta1) * gi;
    float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * p[i]);
}

// Row-major C[M,N] = op(A) * op(B) in fp32. cuBLASLt is column-major: it computes C^T =
// op(B)^T * op(A)^T on the same bytes, so B goes in its A slot and A in its B slot.
struct gemm {
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
};
static cublasLtHandle_t lt;
static void *lt_workspace;

static gemm gemm_plan(int M, int N, int K, bool trans_a, bool trans_b)
{
    gemm g;
    cublasOperation_t op_slot_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_slot_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    CHECK_LT(cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CHECK_LT(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_slot_a, sizeof op_slot_a));
    CHECK_LT(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_slot_b, sizeof op_slot_b));
    int ra = trans_b ? K : N, ca = trans_b ? N : K, rb = trans_a ? M : K, cb = trans_a ? K : M;
    CHECK_LT(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_32F, ra, ca, ra));
    CHECK_LT(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_32F, rb, cb, rb));
    CHECK_LT(cublasLtMatrixLayoutCreate(&g.lc, CUDA_R_32F, N, M, N));
    cublasLtMatmulPreference_t pref;
    uint64_t ws = WS_BYTES;
    uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;   // no split-K: bitwise repeatable
    CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_reduction,
                                                  sizeof no_reduction));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, g.desc, g.la, g.lb, g.lc, g.lc, pref, 1, &res, &found));
    if (found < 1) {
        fprintf(stderr, "error: cuBLASLt has no algorithm for %dx%dx%d\n", M, N, K);
        exit(1);
    }
    CHECK_LT(cublasLtMatmulPreferenceDestroy(pref));
    g.algo = res.algo;
    return g;
}

static void gemm_run(const gemm &g, float *c, const float *a, const float *b, cudaStream_t s)
{
    const float one = 1.0f, zero = 0.0f;
    CHECK_LT(cublasLtMatmul(lt, g.desc, &one, b, g.la, a, g.lb, &zero, c, g.lc, c, g.lc, &g.algo, lt_workspace,
                            WS_BYTES, s));
}

static unsigned blocks_for(int n) { return (unsigned)((n + THREADS - 1) / THREADS); }

// A parameter "tensor": a slice of the flat parameter buffer with its own AdamW launch.
struct tensor {
    size_t off;
    int n;
};

struct adam_hparams {
    float lr, beta1, beta2, eps, wd;
};

// What one batch shape needs: activations, the loss, and matmul plans for `rows` rows.
struct workspace {
    int rows;
    float *x, *hpre, *h, *logits, *dlogits, *row_loss, *loss, *dh, *dhpre;
    int *labels;
    gemm fwd1, fwd2, dw2, dh_, dw1;
};

struct model {
    float *params, *grads, *m, *v;
    float *w1, *b1, *w2, *b2, *gw1, *gb1, *gw2, *gb2;
    float *sq, *clip, *mean_loss;
    std::vector<tensor> tensors;
};

// The data-parallel group (world 1: none).
struct ranks {
    int rank = 0, world = 1;
#ifdef WL_NCCL
    ncclComm_t comm = NULL;
#endif
};

static void add_tensors(std::vector<tensor> &t, size_t off, size_t n)
{
    for (size_t done = 0; done < n; done += SLICE)
        t.push_back({off + done, (int)(n - done < SLICE ? n - done : SLICE)});
}

// The nodes of a captured step whose arguments change every step (batch seed, bias corrections).
struct hand_graph {
    cudaGraphExec_t exec = NULL;
    cudaGraphNode_t batch_node;
    std::vector<cudaGraphNode_t> adam_nodes;
};

static void set_node(cudaGraphExec_t exec, cudaGraphNode_t node, void *func, unsigned grid, void **args)
{
    cudaKernelNodeParams kp = {};
    kp.func = func;
    kp.gridDim = dim3(grid);
    kp.blockDim = dim3(THREADS);
    kp.kernelParams = args;
    CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &kp));
}

#ifdef WL_NCCL
#define CHECK_NCCL(call) check_nccl((call), #call)
static void check_nccl(ncclResult_t r, const char *what)
{
    if (r != ncclSuccess) {
        fprintf(stderr, "error: %s failed: %s\n", what, ncclGetErrorString(r));
        exit(1);
    }
}
#endif

// Averages n floats in place over the ranks (nothing with one rank).
static void average(const ranks &rk, float *buf, float *out, size_t n, cudaStream_t s)
{
#ifdef WL_NCCL
    if (rk.comm)
        CHECK_NCCL(ncclAllReduce(buf, out, n, ncclFloat, ncclAvg, rk.comm, s));
#else
    (void)rk, (void)buf, (void)out, (void)n, (void)s;
#endif
}

// One training step on s with workspace a. With hg capturing, remembers the per-step nodes.
static void train_step(model &md, workspace &a, const ranks &rk, const adam_hparams &hp, unsigned long long step,
                       cudaStream_t s, hand_graph *hg)
{
    const int rows = a.rows;
    const size_t n_params = md.tensors.back().off + md.tensors.back().n;
    gen_batch<<<blocks_for(rows * I), THREADS, 0, s>>>(a.x, a.labels, rows, B, step * rk.world + rk.rank);
    if (hg)
        hg->batch_node = wl_last_captured(s);
    gemm_run(a.fwd1, a.hpre, a.x, md.w1, s);
    bias_gelu<<<blocks_for(rows * H), THREADS, 0, s>>>(a.hpre, a.h, md.b1, rows, H);
    gemm_run(a.fwd2, a.logits, a.h, md.w2, s);
    softmax_xent<<<rows, THREADS, 0, s>>>(a.logits, md.b2, a.labels, a.dlogits, a.row_loss, O);
    mean_loss<<<1, 1, 0, s>>>(a.row_loss, a.loss, rows);
    gemm_run(a.dw2, md.gw2, a.dlogits, a.h, s);
    column_sum<<<blocks_for(O), THREADS, 0, s>>>(a.dlogits, md.gb2, rows, O);
    gemm_run(a.dh_, a.dh, a.dlogits, md.w2, s);
    gelu_backward<<<blocks_for(rows * H), THREADS, 0, s>>>(a.dh, a.hpre, a.dhpre, rows * H);
    gemm_run(a.dw1, md.gw1, a.dhpre, a.x, s);
    column_sum<<<blocks_for(H), THREADS, 0, s>>>(a.dhpre, md.gb1, rows, H);
    average(rk, md.grads, md.grads, n_params, s);
    for (size_t t = 0; t < md.tensors.size(); t++)
        sq_norm<<<1, THREADS, 0, s>>>(md.grads + md.tensors[t].off, md.tensors[t].n, md.sq + t);
    clip_scale<<<1, 1, 0, s>>>(md.sq, (int)md.tensors.size(), md.clip, 1.0f);
    float bc1 = 1.0f - powf(hp.beta1, (float)step), bc2 = 1.0f - powf(hp.beta2, (float)step);
    for (const tensor &t : md.tensors) {
        adamw<<<blocks_for(t.n), THREADS, 0, s>>>(md.params + t.off, md.grads + t.off, md.m + t.off, md.v + t.off,
                                                  md.clip, t.n, hp.lr, hp.beta1, hp.beta2, hp.eps, hp.wd, bc1, bc2);
        if (hg)
            hg->adam_nodes.push_back(wl_last_captured(s));
    }
    average(rk, a.loss, md.mean_loss, 1, s);
    CHECK(cudaGetLastError());
}

// Replay preparation: patch the captured step's per-step nodes with this step's values.
static void patch_step(model &md, workspace &a, const adam_hparams &hp, unsigned long long step, hand_graph &hg)
{
    void *batch_args[] = {&a.x, &a.labels, &a.rows, &B, &step};
    set_node(hg.exec, hg.batch_node, (void *)gen_batch, blocks_for(B * I), batch_args);
    float bc1 = 1.0f - powf(hp.beta1, (float)step), bc2 = 1.0f - powf(hp.beta2, (float)step);
    adam_hparams h = hp;
    for (size_t i = 0; i < md.tensors.size(); i++) {
        const tensor &t = md.tensors[i];
        float *p = md.params + t.off, *g = md.grads + t.off, *m = md.m + t.off, *v = md.v + t.off;
        int n = t.n;
        void *args[] = {&p, &g, &m, &v, &md.clip, &n, &h.lr, &h.beta1, &h.beta2, &h.eps, &h.wd, &bc1, &bc2};
        set_node(hg.exec, hg.adam_nodes[i], (void *)adamw, blocks_for(n), args);
    }
}

template <typename T> static T *device_alloc(size_t n)
{
    T *p;
    CHECK(cudaMalloc(&p, n * sizeof(T)));
    return p;
}

static workspace workspace_new(int rows)
{
    workspace a;
    a.rows = rows;
    a.x = device_alloc<float>(rows * I);
    a.labels = device_alloc<int>(rows);
    a.hpre = device_alloc<float>(rows * H);
    a.h = device_alloc<float>(rows * H);
    a.logits = device_alloc<float>(rows * O);
    a.dlogits = device_alloc<float>(rows * O);
    a.row_loss = device_alloc<float>(rows);
    a.loss = device_alloc<float>(1);
    a.dh = device_alloc<float>(rows * H);
    a.dhpre = device_alloc<float>(rows * H);
    a.fwd1 = gemm_plan(rows, H, I, false, true);   // hpre = x W1^T
    a.fwd2 = gemm_plan(rows, O, H, false, true);   // logits = h W2^T
    a.dw2 = gemm_plan(O, H, rows, true, false);    // dW2 = dlogits^T h
    a.dh_ = gemm_plan(rows, H, O, false, false);   // dh = dlogits W2
    a.dw1 = gemm_plan(H, I, rows, true, false);    // dW1 = dhpre^T x
    return a;
}

static int env_int(const char *name, int otherwise)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : otherwise;
}

// Joins the data-parallel group: rank 0 publishes the NCCL unique id in `id_file` (written
// aside, then renamed, so a reader never sees half of it), the others wait up to a minute for it.
static void join_ranks(ranks &rk, const char *id_file)
{
#ifdef WL_NCCL
    ncclUniqueId id;
    if (rk.rank == 0) {
        CHECK_NCCL(ncclGetUniqueId(&id));
        char tmp[4096];
        snprintf(tmp, sizeof tmp, "%s.%d", id_file, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, id_file) != 0) {
            fprintf(stderr, "error: cannot write %s: %s\n", id_file, strerror(errno));
            exit(1);
        }
    } else {
        FILE *f = NULL;
        for (int waited_ms = 0; !(f = fopen(id_file, "rb")); waited_ms += 10) {
            if (waited_ms >= 60000) {
                fprintf(stderr, "error: rank %d: no NCCL id in %s after 60 s\n", rk.rank, id_file);
                exit(1);
            }
            usleep(10000);
        }
        size_t got = fread(&id, sizeof id, 1, f);
        fclose(f);
        if (got != 1) {
            fprintf(stderr, "error: rank %d: short NCCL id in %s\n", rk.rank, id_file);
            exit(1);
        }
    }
    CHECK_NCCL(ncclCommInitRank(&rk.comm, rk.world, id, rk.rank));
#else
    (void)rk;
    fprintf(stderr, "error: --nccl-id-file: this mini-trainer was built without NCCL\n");
    exit(2);
#endif
}

int main(int argc, char **argv)
{
    int steps = 50, warmup = 10, change_rank = -1, change_step = 0;
    bool use_graph = false;
    const char *id_file = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--graph"))
            use_graph = true;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc && (B = atoi(argv[++i])) >= 2)
            ;
        else if (!strcmp(argv[i], "--nccl-id-file") && i + 1 < argc)
            id_file = argv[++i];
        else if (!strcmp(argv[i], "--shape-change") && i + 1 < argc &&
                 sscanf(argv[++i], "%d:%d", &change_rank, &change_step) == 2)
            ;
        else {
            fprintf(stderr, "usage: %s [--steps N] [--warmup N] [--batch ROWS] [--graph] [--nccl-id-file F] [--shape-change RANK:STEP]\n",
                    argv[0]);
            return 2;
        }
    }
    if (warmup < 1 || steps <= warmup) {
        fprintf(stderr, "error: need 1 <= --warmup < --steps\n");
        return 2;
    }
    ranks rk;
    if (id_file) {
        rk.rank = env_int("RANK", 0), rk.world = env_int("WORLD_SIZE", 1);
        if (rk.world < 1 || rk.rank < 0 || rk.rank >= rk.world) {
            fprintf(stderr, "error: RANK %d of WORLD_SIZE %d\n", rk.rank, rk.world);
            return 2;
        }
    }
    if (use_graph && (id_file || change_rank >= 0)) {
        fprintf(stderr, "error: --graph runs one rank with one batch shape\n");
        return 2;
    }
    int devices = 0;
    CHECK(cudaGetDeviceCount(&devices));
    CHECK(cudaSetDevice(env_int("LOCAL_RANK", rk.rank) % devices));

    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK_LT(cublasLtCreate(&lt));
    CHECK(cudaMalloc(&lt_workspace, WS_BYTES));
    if (id_file)
        join_ranks(rk, id_file);

    model md;
    const size_t n_w1 = (size_t)H * I, n_w2 = (size_t)O * H, n_params = n_w1 + H + n_w2 + O;
    md.params = device_alloc<float>(n_params);
    md.grads = device_alloc<float>(n_params);
    md.m = device_alloc<float>(n_params);
    md.v = device_alloc<float>(n_params);
    md.w1 = md.params, md.b1 = md.w1 + n_w1, md.w2 = md.b1 + H, md.b2 = md.w2 + n_w2;
    md.gw1 = md.grads, md.gb1 = md.gw1 + n_w1, md.gw2 = md.gb1 + H, md.gb2 = md.gw2 + n_w2;
    add_tensors(md.tensors, 0, n_w1);
    add_tensors(md.tensors, n_w1, H);
    add_tensors(md.tensors, n_w1 + H, n_w2);
    add_tensors(md.tensors, n_w1 + H + n_w2, O);
    md.sq = device_alloc<float>(md.tensors.size());
    md.clip = device_alloc<float>(1);
    md.mean_loss = device_alloc<float>(1);
    workspace full = workspace_new(B), half = change_rank == rk.rank ? workspace_new(B / 2) : full;

    CHECK(cudaMemsetAsync(md.params, 0, n_params * sizeof(float), s));
    init_uniform<<<blocks_for((int)n_w1), THREADS, 0, s>>>(md.w1, (int)n_w1, 1.0f / sqrtf((float)I), 1);
    init_uniform<<<blocks_for((int)n_w2), THREADS, 0, s>>>(md.w2, (int)n_w2, 1.0f / sqrtf((float)H), 2);
    CHECK(cudaMemsetAsync(md.m, 0, n_params * sizeof(float), s));
    CHECK(cudaMemsetAsync(md.v, 0, n_params * sizeof(float), s));
    CHECK(cudaStreamSynchronize(s));

    const adam_hparams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f};
    hand_graph hg;
    cudaGraph_t graph = NULL;
    struct timespec t0 = {0, 0}, t1;
    for (int step = 1; step <= steps; step++) {
        if (step == warmup + 1)
            clock_gettime(CLOCK_MONOTONIC, &t0);
        workspace &a = change_rank == rk.rank && step >= change_step ? half : full;
        // With --graph, step 1 runs eagerly (cuBLASLt's first-call work stays out of the
        // capture), step 2 is captured, later ones are patched and replayed.
        if (!use_graph || step == 1) {
            train_step(md, a, rk, hp, (unsigned long long)step, s, NULL);
        } else {
            if (!hg.exec) {
                // The graph stays alive: its node handles name the nodes patched later.
                CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
                train_step(md, a, rk, hp, (unsigned long long)step, s, &hg);
                CHECK(cudaStreamEndCapture(s, &graph));
                CHECK(cudaGraphInstantiate(&hg.exec, graph, 0));
            } else {
                patch_step(md, a, hp, (unsigned long long)step, hg);
            }
            CHECK(cudaGraphLaunch(hg.exec, s));
        }
        float loss, mean;   // the host read of every step (like loss.item())
        CHECK(cudaMemcpyAsync(&loss, a.loss, sizeof loss, cudaMemcpyDeviceToHost, s));
        if (rk.world > 1)
            CHECK(cudaMemcpyAsync(&mean, md.mean_loss, sizeof mean, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        if (rk.world > 1)
            printf("step %d loss %.9g mean %.9g rows %d\n", step, loss, mean, a.rows);
        else
            printf("step %d loss %.9g\n", step, loss);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double iter_us = ((t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3) / (steps - warmup);

    std::vector<float> host(n_params);
    CHECK(cudaMemcpy(host.data(), md.params, n_params * sizeof(float), cudaMemcpyDeviceToHost));
    printf("checksum %016llx\n", (unsigned long long)wl_fnv1a(WL_FNV_OFFSET, host.data(), n_params * sizeof(float)));
    printf("iter_us %.3f\n", iter_us);
    if (hg.exec)
        CHECK(cudaGraphExecDestroy(hg.exec));
    if (graph)
        CHECK(cudaGraphDestroy(graph));
#ifdef WL_NCCL
    if (rk.comm)
        CHECK_NCCL(ncclCommDestroy(rk.comm));
#endif
    return 0;
}
