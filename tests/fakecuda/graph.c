/* Graphs of the fake driver: a graph is its nodes in insertion order (captured ops, added kernel
 * nodes) and a launch runs them in that order. An executable graph owns deep copies of the
 * nodes, so patching it (Exec*SetParams, ExecUpdate) never touches the source graph. */
#include "fake.h"
#include <stdlib.h>
#include <string.h>

struct cg_exec {
  enum cg_magic magic;
  size_t n;
  CUgraphNode *origin;     /* source node handles, paired by position with nodes */
  struct cg_node *nodes;
  size_t mem;              /* device memory it holds (cg_graph_mem_take) */
};

struct cg_graph *cg_graph_new(void)
{
  struct cg_graph *g = calloc(1, sizeof *g);
  if (g) g->magic = CG_GRAPH;
  return g;
}

void cg_graph_free(struct cg_graph *g)
{
  for (size_t i = 0; i < g->n; i++) {
    cg_node_clear(g->nodes[i]);
    free(g->nodes[i]);
  }
  free(g->nodes);
  g->magic = CG_DEAD;
  free(g);
}

struct cg_node *cg_graph_append(struct cg_graph *g, const struct cg_node *n)
{
  if (g->n == g->cap) {
    size_t cap = g->cap ? 2 * g->cap : 16;
    struct cg_node **nodes = realloc(g->nodes, cap * sizeof *nodes);
    if (!nodes) return NULL;
    g->nodes = nodes;
    g->cap = cap;
  }
  struct cg_node *copy = malloc(sizeof *copy);
  if (copy) *copy = *n;  /* takes over the parameter bytes */
  if (copy) g->nodes[g->n++] = copy;
  return copy;
}

static struct cg_graph *graph_get(CUgraph h)
{
  struct cg_graph *g = (struct cg_graph *)h;
  return g && g->magic == CG_GRAPH ? g : NULL;
}

static struct cg_node *node_get(CUgraphNode h)
{
  struct cg_node *n = (struct cg_node *)h;
  return n && n->magic == CG_NODE ? n : NULL;
}

static struct cg_exec *exec_get(CUgraphExec h)
{
  struct cg_exec *e = (struct cg_exec *)h;
  return e && e->magic == CG_EXEC ? e : NULL;
}

/* Deep copy: a kernel node gets its own parameter bytes. */
static CUresult node_copy(struct cg_node *dst, const struct cg_node *src)
{
  *dst = *src;
  if (src->kind != CG_NODE_KERNEL) return CUDA_SUCCESS;
  const struct cg_kernel_def *def = src->u.k.def;
  if (!(dst->u.k.bytes = malloc(def->total ? def->total : 1))) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(dst->u.k.bytes, src->u.k.bytes, def->total);
  for (unsigned i = 0; i < def->nparams; i++) dst->u.k.args[i] = dst->u.k.bytes + def->offset[i];
  return CUDA_SUCCESS;
}

static void exec_free_nodes(struct cg_node *nodes, size_t n)
{
  for (size_t i = 0; i < n; i++) cg_node_clear(&nodes[i]);
  free(nodes);
}

/* Deep copies of all nodes of g, or NULL (out of memory). Caller holds cg_lock. */
static struct cg_node *copy_nodes(const struct cg_graph *g)
{
  struct cg_node *nodes = calloc(g->n ? g->n : 1, sizeof *nodes);
  for (size_t i = 0; nodes && i < g->n; i++)
    if (node_copy(&nodes[i], g->nodes[i]) != CUDA_SUCCESS) { exec_free_nodes(nodes, i); nodes = NULL; }
  return nodes;
}

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
  CG_ENTER(cuGraphCreate);
  if (!phGraph || flags) return CUDA_ERROR_INVALID_VALUE;
  struct cg_graph *g = cg_graph_new();
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  *phGraph = (CUgraph)g;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
  CG_ENTER(cuGraphDestroy);
  pthread_mutex_lock(&cg_lock);
  struct cg_graph *g = graph_get(hGraph);
  if (g) cg_graph_free(g);
  pthread_mutex_unlock(&cg_lock);
  return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* A kernel node from node parameters, refused as a launch with that shape and the node's
 * launch attributes (attrs: those of the node being updated, or none) would be. */
static CUresult kernel_node(struct cg_node *n, const CUDA_KERNEL_NODE_PARAMS *p,
                            const CUlaunchAttribute *attrs, unsigned nattrs)
{
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUfunction f = p->func ? p->func : (CUfunction)p->kern;  /* kern only counts without func */
  struct cg_shape shape = { { p->gridDimX, p->gridDimY, p->gridDimZ },
                            { p->blockDimX, p->blockDimY, p->blockDimZ }, p->sharedMemBytes };
  CUresult r = cg_shape_check(f, &shape, attrs, nattrs);
  if (r != CUDA_SUCCESS) return r;
  return cg_node_set_kernel(n, f, shape.grid, shape.block, shape.shmem, p->kernelParams, p->extra);
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
  const CUgraphNode *dependencies, size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
  CG_ENTER(cuGraphAddKernelNode_v2);
  if (!phGraphNode || (numDependencies && !dependencies)) return CUDA_ERROR_INVALID_VALUE;
  struct cg_node n;
  CUresult r = kernel_node(&n, nodeParams, NULL, 0);
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&cg_lock);
  struct cg_graph *g = graph_get(hGraph);
  struct cg_node *added = g ? cg_graph_append(g, &n) : NULL;
  pthread_mutex_unlock(&cg_lock);
  if (!added) {
    cg_node_clear(&n);
    return g ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
  }
  *phGraphNode = (CUgraphNode)added;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
  CG_ENTER(cuGraphKernelNodeGetParams_v2);
  struct cg_node *n = node_get(hNode);
  if (!n || !nodeParams || n->kind != CG_NODE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  *nodeParams = (CUDA_KERNEL_NODE_PARAMS){
    .func = n->u.k.func, .kern = n->u.k.kern,
    .gridDimX = n->u.k.grid[0], .gridDimY = n->u.k.grid[1], .gridDimZ = n->u.k.grid[2],
    .blockDimX = n->u.k.block[0], .blockDimY = n->u.k.block[1], .blockDimZ = n->u.k.block[2],
    .sharedMemBytes = n->u.k.shmem, .kernelParams = n->u.k.args,
  };
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
  CG_ENTER(cuGraphNodeGetType);
  static const CUgraphNodeType types[] = {
    [CG_NODE_KERNEL] = CU_GRAPH_NODE_TYPE_KERNEL, [CG_NODE_MEMSET] = CU_GRAPH_NODE_TYPE_MEMSET,
    [CG_NODE_MEMCPY] = CU_GRAPH_NODE_TYPE_MEMCPY, [CG_NODE_HOST] = CU_GRAPH_NODE_TYPE_HOST,
  };
  struct cg_node *n = node_get(hNode);
  if (!n || !type) return CUDA_ERROR_INVALID_VALUE;
  *type = types[n->kind];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
  CG_ENTER(cuGraphGetNodes);
  if (!numNodes) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  struct cg_graph *g = graph_get(hGraph);
  if (g && nodes) {
    for (size_t i = 0; i < *numNodes; i++) nodes[i] = i < g->n ? (CUgraphNode)g->nodes[i] : NULL;
    if (*numNodes > g->n) *numNodes = g->n;
  } else if (g) {
    *numNodes = g->n;
  }
  pthread_mutex_unlock(&cg_lock);
  return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             unsigned long long flags)
{
  CG_ENTER(cuGraphInstantiateWithFlags);
  if (!phGraphExec) return CUDA_ERROR_INVALID_VALUE;
  struct cg_exec *e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  struct cg_graph *g = graph_get(hGraph);
  if (g) {
    e->n = g->n;
    e->origin = malloc((g->n ? g->n : 1) * sizeof *e->origin);
    e->nodes = e->origin ? copy_nodes(g) : NULL;
    r = e->nodes ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; e->nodes && i < g->n; i++) e->origin[i] = (CUgraphNode)g->nodes[i];
  }
  pthread_mutex_unlock(&cg_lock);
  if (r != CUDA_SUCCESS) { free(e->origin); free(e); return r; }
  cg_host_spin_build(e->n);
  e->mem = cg_graph_mem_take(e->n);
  e->magic = CG_EXEC;
  *phGraphExec = (CUgraphExec)e;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
  CG_ENTER(cuGraphExecDestroy);
  pthread_mutex_lock(&cg_lock);
  struct cg_exec *e = exec_get(hGraphExec);
  if (e) {
    e->magic = CG_DEAD;
    cg_graph_mem_give(e->mem);
    exec_free_nodes(e->nodes, e->n);
    free(e->origin);
    free(e);
  }
  pthread_mutex_unlock(&cg_lock);
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult graph_launch(CUgraphExec hGraphExec, CUstream hStream)
{
  CUresult r = cg_need_ctx();
  if (r != CUDA_SUCCESS) return r;
  struct cg_stream *s = cg_stream_get(hStream);
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (cg_capturing(s)) return cg_capture_refuse(s);  /* child-graph nodes are not modelled */
  pthread_mutex_lock(&cg_lock);
  struct cg_exec *e = exec_get(hGraphExec);
  for (size_t i = 0; e && i < e->n; i++) cg_node_run(&e->nodes[i]);
  if (e) cg_gpu_run(s, e->n, true);
  pthread_mutex_unlock(&cg_lock);
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  atomic_fetch_add_explicit(&cg_count.graph_launches, 1, memory_order_relaxed);
  return CUDA_SUCCESS;
}

CG_TWINS(cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream),
          graph_launch(hGraphExec, hStream))

/* The executable copy of hNode, or NULL. Caller holds cg_lock. */
static struct cg_node *exec_node(CUgraphExec hGraphExec, CUgraphNode hNode, enum cg_node_kind kind)
{
  struct cg_exec *e = exec_get(hGraphExec);
  for (size_t i = 0; e && i < e->n; i++)
    if (e->origin[i] == hNode) return e->nodes[i].kind == kind ? &e->nodes[i] : NULL;
  return NULL;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
  CG_ENTER(cuGraphExecKernelNodeSetParams_v2);
  /* The node keeps its launch attributes: a new grid must still fit its cluster dimension. */
  CUlaunchAttribute attrs[4];
  unsigned nattrs = 0;
  pthread_mutex_lock(&cg_lock);
  struct cg_node *n = exec_node(hGraphExec, hNode, CG_NODE_KERNEL);
  if (n) {
    nattrs = n->u.k.nattrs;
    memcpy(attrs, n->u.k.attrs, sizeof attrs);
  }
  pthread_mutex_unlock(&cg_lock);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  struct cg_node fresh;
  CUresult r = kernel_node(&fresh, nodeParams, attrs, nattrs);
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&cg_lock);
  n = exec_node(hGraphExec, hNode, CG_NODE_KERNEL);
  if (n) {
    fresh.u.k.nattrs = n->u.k.nattrs;  /* launch attributes belong to the node, not the params */
    memcpy(fresh.u.k.attrs, n->u.k.attrs, sizeof fresh.u.k.attrs);
    cg_node_clear(n);
    *n = fresh;
  }
  pthread_mutex_unlock(&cg_lock);
  if (!n) cg_node_clear(&fresh);
  return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
  const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
  CG_ENTER(cuGraphExecMemsetNodeSetParams);
  if (!p || !p->dst || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&cg_lock);
  struct cg_node *n = exec_node(hGraphExec, hNode, CG_NODE_MEMSET);
  if (n) {
    n->u.set.dst = p->dst;
    n->u.set.value = p->value;
    n->u.set.elem = p->elementSize;
    n->u.set.width = p->width;
    n->u.set.height = p->height ? p->height : 1;
    n->u.set.pitch = p->height > 1 ? p->pitch : p->width * p->elementSize;
  }
  pthread_mutex_unlock(&cg_lock);
  return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Only the 1-D copies this fake captures (device-to-device) can be re-targeted. */
CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
  const CUDA_MEMCPY3D *c, CUcontext ctx)
{
  CG_ENTER(cuGraphExecMemcpyNodeSetParams);
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (c->Height > 1 || c->Depth > 1 || c->srcMemoryType == CU_MEMORYTYPE_ARRAY ||
      c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
    return CUDA_ERROR_NOT_SUPPORTED;
  CUdeviceptr src = (c->srcMemoryType == CU_MEMORYTYPE_HOST ? (CUdeviceptr)c->srcHost : c->srcDevice)
                    + c->srcXInBytes;
  CUdeviceptr dst = (c->dstMemoryType == CU_MEMORYTYPE_HOST ? (CUdeviceptr)c->dstHost : c->dstDevice)
                    + c->dstXInBytes;
  pthread_mutex_lock(&cg_lock);
  struct cg_node *n = exec_node(hGraphExec, hNode, CG_NODE_MEMCPY);
  if (n) n->u.cpy = (__typeof__(n->u.cpy)){ dst, src, c->WidthInBytes };
  pthread_mutex_unlock(&cg_lock);
  return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Same node count and kinds, position by position: every node's parameters are copied in. */
CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                      CUgraphExecUpdateResultInfo *resultInfo)
{
  CG_ENTER(cuGraphExecUpdate_v2);
  CUgraphExecUpdateResultInfo info = { CU_GRAPH_EXEC_UPDATE_SUCCESS, NULL, NULL };
  CUresult r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  pthread_mutex_lock(&cg_lock);
  struct cg_exec *e = exec_get(hGraphExec);
  struct cg_graph *g = graph_get(hGraph);
  if (!e || !g) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (e->n != g->n) {
    info.result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
  } else {
    for (size_t i = 0; i < e->n && !info.errorNode; i++)
      if (e->nodes[i].kind != g->nodes[i]->kind) {
        info.result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        info.errorNode = (CUgraphNode)g->nodes[i];
      }
    struct cg_node *nodes = info.errorNode ? NULL : copy_nodes(g);
    if (nodes) {
      exec_free_nodes(e->nodes, e->n);
      e->nodes = nodes;
      r = CUDA_SUCCESS;
    } else if (!info.errorNode) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  pthread_mutex_unlock(&cg_lock);
  if (resultInfo) *resultInfo = info;
  return r;
}
