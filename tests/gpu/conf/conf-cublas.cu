// conf-cublas: cublasSgemm (handle on a created stream, fixed workspace) and cublasLtMatmul with a
// bias epilogue between custom kernels; alpha changes every iteration. A shim that replays a
// library launch with stale scalars or workspace, or drops/reorders one, changes the checksum.
#include "conf_lib.h"
#include <cublasLt.h>
#include <cublas_v2.h>

enum { N = 256, NN = N * N, ITERS = 40, WS_BYTES = 4 << 20 };

#define CKB(call) check_blas((call), #call, __FILE__, __LINE__)
static void check_blas(cublasStatus_t st, const char *what, const char *file, int line)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return;
    fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, what, cublasGetStatusString(st));
    exit(1);
}

int main()
{
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *a, *b, *c, *d, *bias;
    unsigned long long *acc;
    void *ws, *lt_ws;
    CK(cudaMalloc(&a, NN * sizeof(float)));
    CK(cudaMalloc(&b, NN * sizeof(float)));
    CK(cudaMalloc(&c, NN * sizeof(float)));
    CK(cudaMalloc(&d, NN * sizeof(float)));
    CK(cudaMalloc(&bias, N * sizeof(float)));
    CK(cudaMalloc(&acc, sizeof *acc));
    CK(cudaMalloc(&ws, WS_BYTES));
    CK(cudaMalloc(&lt_ws, WS_BYTES));
    CK(cudaMemsetAsync(acc, 0, sizeof *acc, s));
    CK(cudaMemsetAsync(c, 0, NN * sizeof(float), s));
    LAUNCH(conf_init, NN, s, a, NN, 1ULL);
    LAUNCH(conf_init, NN, s, b, NN, 2ULL);
    LAUNCH(conf_init, N, s, bias, N, 3ULL);

    cublasHandle_t h;
    CKB(cublasCreate(&h));
    CKB(cublasSetStream(h, s));
    CKB(cublasSetWorkspace(h, ws, WS_BYTES)); // fixed: no hidden per-stream workspace

    // D = alpha * C * B + bias (column-major, every matrix N x N), algorithm by heuristic.
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t layout;
    cublasLtMatmulPreference_t pref;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    size_t lt_ws_bytes = WS_BYTES;
    CKB(cublasLtCreate(&lt));
    CKB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CKB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    CKB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    CKB(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, N, N, N));
    CKB(cublasLtMatmulPreferenceCreate(&pref));
    CKB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt_ws_bytes,
                                             sizeof lt_ws_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    CKB(cublasLtMatmulAlgoGetHeuristic(lt, desc, layout, layout, layout, layout, pref, 1, &heur, &found));
    if (found == 0) {
        fprintf(stderr, "%s:%d: cublasLtMatmulAlgoGetHeuristic found no algorithm\n", __FILE__, __LINE__);
        return 1;
    }

    unsigned long long hash = WL_FNV_OFFSET;
    for (int it = 0; it < ITERS; it++) {
        float alpha = 1.0f / (float)N * (float)(1 + it % 3), half = 0.5f, zero = 0.0f, lt_alpha = 0.75f;
        LAUNCH(conf_step, NN, s, a, NN, (unsigned long long)it);
        LAUNCH(conf_chain, 0, s, acc, (unsigned long long)it << 8);
        // C = alpha * A * B + C / 2
        CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &alpha, a, N, b, N, &half, c, N));
        LAUNCH(conf_squash, NN, s, c, NN);
        LAUNCH(conf_chain, 0, s, acc, ((unsigned long long)it << 8) + 1);
        CKB(cublasLtMatmul(lt, desc, &lt_alpha, c, layout, b, layout, &zero, d, layout, d, layout, &heur.algo,
                           lt_ws, WS_BYTES, s));
        LAUNCH(conf_squash, NN, s, d, NN);
        // C = alpha * D^T * A: a transposed operand, then fed back into A
        CKB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, N, N, &alpha, d, N, a, N, &zero, c, N));
        LAUNCH(conf_squash, NN, s, c, NN);
        LAUNCH(conf_axpy, NN, s, a, c, 0.25f, NN);
        LAUNCH(conf_scale, N, s, bias, 0.99f, N);
        for (int k = 0; k < 3; k++)
            LAUNCH(conf_chain, 0, s, acc, ((unsigned long long)it << 8) + 2 + k);
        if (it % 10 == 9 || it == ITERS - 1) {
            hash = conf_hash_stream(hash, d, NN * sizeof(float), s);
            hash = conf_hash_stream(hash, a, NN * sizeof(float), s);
            hash = conf_hash_stream(hash, acc, sizeof *acc, s);
            conf_print(hash);
        }
    }
    CKB(cublasLtMatmulPreferenceDestroy(pref));
    CKB(cublasLtMatrixLayoutDestroy(layout));
    CKB(cublasLtMatmulDescDestroy(desc));
    CKB(cublasLtDestroy(lt));
    CKB(cublasDestroy(h));
    CK(cudaStreamDestroy(s));
    return 0;
}
