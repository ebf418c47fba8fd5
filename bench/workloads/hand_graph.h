/* The hand-made graph reference of the driver-API workloads: the same iteration code either
 * launches eagerly, or is captured ONCE into a CUDA graph by stream capture and then replayed,
 * patching only the kernel nodes whose argument bytes differ from their previous launch. */
#ifndef BENCH_HAND_GRAPH_H
#define BENCH_HAND_GRAPH_H
#include <cuda.h>
#include <stddef.h>

/* Kernel arguments packed at their natural alignment, with the pointer array cuLaunchKernel
 * takes; the packed bytes are what a replay compares. */
#define HG_MAX_ARGS 8
struct hg_args {
    void *slot[HG_MAX_ARGS];
    _Alignas(8) unsigned char bytes[64];
    size_t len;
    unsigned n;
};
void hg_arg(struct hg_args *a, const void *value, size_t size);
#define HG_ARG(a, v) hg_arg((a), &(v), sizeof(v))

/* HG_WARMUP runs one iteration eagerly before the capture, so that lazy work of libraries
 * (cuBLASLt's module loads, first-call setup) does not happen inside the capture. */
enum hg_mode { HG_EAGER, HG_WARMUP, HG_CAPTURE, HG_REPLAY };

struct hg_node;
struct hand_graph {
    enum hg_mode mode;
    CUstream stream;
    CUgraph graph;                /* kept alive: its node handles name the nodes to patch */
    CUgraphExec exec;
    struct hg_node *nodes;
    size_t n_nodes, cap, cursor;
    unsigned long long patched;   /* node updates issued during replays */
};

/* use_graph=0: every call launches eagerly and hg_begin/hg_end do nothing. */
void hg_init(struct hand_graph *h, CUstream stream, int use_graph);
void hg_destroy(struct hand_graph *h);
/* Bracket one iteration. With use_graph, the first runs eagerly, the second is captured and
 * launched, later ones are patched and replayed. */
void hg_begin(struct hand_graph *h);
void hg_end(struct hand_graph *h);
/* True when work the helper does not track (cuBLASLt) must be issued: eager or capturing. */
static inline int hg_issue_untracked(const struct hand_graph *h) { return h->mode != HG_REPLAY; }
/* A 1-D launch of f on h->stream (or its graph node). */
void hg_launch(struct hand_graph *h, CUfunction f, unsigned grid, unsigned block, struct hg_args *a);

/* The driver on device 0's primary context (the one cuBLASLt's runtime uses too), made
 * current, and the module of this PTX loaded in it. */
CUmodule hg_open(const char *ptx);

/* Exit with the driver's error name; these programs have no recovery to offer. */
void hg_check(CUresult r, const char *what);
#define HG_CHECK(call) hg_check((call), #call)
#endif
