/* Hand-made graph reference for the driver-API workloads (see hand_graph.h): what a careful
 * programmer would write by hand, capture once, then per iteration patch the kernel nodes
 * whose arguments changed (step counters, alternating buffers) and launch the graph. */
#include "hand_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hg_node {
    CUgraphNode node;
    CUfunction func;
    unsigned grid, block;
    size_t len;
    unsigned char bytes[64];
};

void hg_check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return;
    const char *name = NULL;
    cuGetErrorName(r, &name);
    fprintf(stderr, "error: %s failed: %s (%d)\n", what, name ? name : "?", (int)r);
    exit(1);
}

void hg_arg(struct hg_args *a, const void *value, size_t size)
{
    size_t off = (a->len + size - 1) / size * size;   /* natural alignment, as the ABI lays out */
    if (a->n == HG_MAX_ARGS || off + size > sizeof a->bytes) {
        fprintf(stderr, "error: hg_arg: too many kernel arguments\n");
        exit(1);
    }
    memcpy(a->bytes + off, value, size);
    a->slot[a->n++] = a->bytes + off;
    a->len = off + size;
}

void hg_init(struct hand_graph *h, CUstream stream, int use_graph)
{
    memset(h, 0, sizeof *h);
    h->stream = stream;
    h->mode = use_graph ? HG_WARMUP : HG_EAGER;
}

void hg_destroy(struct hand_graph *h)
{
    if (h->exec)
        cuGraphExecDestroy(h->exec);
    if (h->graph)
        cuGraphDestroy(h->graph);
    free(h->nodes);
    memset(h, 0, sizeof *h);
}

void hg_begin(struct hand_graph *h)
{
    h->cursor = 0;
    if (h->mode == HG_CAPTURE)
        HG_CHECK(cuStreamBeginCapture(h->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
}

void hg_end(struct hand_graph *h)
{
    if (h->mode == HG_WARMUP) {
        h->mode = HG_CAPTURE;
        return;
    }
    if (h->mode == HG_CAPTURE) {
        HG_CHECK(cuStreamEndCapture(h->stream, &h->graph));
        HG_CHECK(cuGraphInstantiate(&h->exec, h->graph, 0));
        h->mode = HG_REPLAY;
    } else if (h->mode == HG_REPLAY && h->cursor != h->n_nodes) {
        fprintf(stderr, "error: iteration made %zu launches, the captured one %zu\n",
                h->cursor, h->n_nodes);
        exit(1);
    }
    if (h->mode == HG_REPLAY)
        HG_CHECK(cuGraphLaunch(h->exec, h->stream));
}

/* The node a launch just added to the capture is the stream's only capture dependency now. */
static CUgraphNode hg_last_captured(CUstream s)
{
    CUstreamCaptureStatus status;
    const CUgraphNode *deps = NULL;
    size_t n = 0;
    HG_CHECK(cuStreamGetCaptureInfo(s, &status, NULL, NULL, &deps, NULL, &n));
    if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || n != 1) {
        fprintf(stderr, "error: capture lost track of its last node (status %d, %zu deps)\n",
                (int)status, n);
        exit(1);
    }
    return deps[0];
}

void hg_launch(struct hand_graph *h, CUfunction f, unsigned grid, unsigned block, struct hg_args *a)
{
    if (h->mode != HG_REPLAY) {
        HG_CHECK(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, h->stream, a->slot, NULL));
        if (h->mode != HG_CAPTURE)
            return;
        if (h->n_nodes == h->cap) {
            h->cap = h->cap ? 2 * h->cap : 256;
            h->nodes = realloc(h->nodes, h->cap * sizeof *h->nodes);
            if (!h->nodes) {
                fprintf(stderr, "error: out of memory\n");
                exit(1);
            }
        }
        struct hg_node *n = &h->nodes[h->n_nodes++];
        n->node = hg_last_captured(h->stream);
        n->func = f;
        n->grid = grid;
        n->block = block;
        n->len = a->len;
        memcpy(n->bytes, a->bytes, a->len);
        return;
    }
    if (h->cursor == h->n_nodes) {
        fprintf(stderr, "error: iteration launches more kernels than the captured one\n");
        exit(1);
    }
    struct hg_node *n = &h->nodes[h->cursor++];
    if (n->func != f || n->grid != grid || n->block != block || n->len != a->len) {
        fprintf(stderr, "error: launch %zu differs in shape from the captured iteration\n",
                h->cursor - 1);
        exit(1);
    }
    if (memcmp(n->bytes, a->bytes, a->len) == 0)
        return;
    CUDA_KERNEL_NODE_PARAMS p = {
        .func = f, .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1,
        .blockDimX = block, .blockDimY = 1, .blockDimZ = 1, .kernelParams = a->slot,
    };
    HG_CHECK(cuGraphExecKernelNodeSetParams(h->exec, n->node, &p));
    memcpy(n->bytes, a->bytes, a->len);
    h->patched++;
}

CUmodule hg_open(const char *ptx)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    HG_CHECK(cuInit(0));
    HG_CHECK(cuDeviceGet(&dev, 0));
    HG_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    HG_CHECK(cuCtxSetCurrent(ctx));
    HG_CHECK(cuModuleLoadData(&mod, ptx));
    return mod;
}
