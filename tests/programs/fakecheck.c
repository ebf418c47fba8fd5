/* fakecheck: checks of the CPU fake driver itself, run by fake-selftest: a capture -> graph ->
 * patch -> launch round trip, launch shapes in graphs, parameter layouts, cuGetProcAddress
 * resolution and FAKECUDA_FAIL.
 * Sets FAKECUDA_FAIL before its first driver call. Prints each failed check; exit 1 on any. */
#include "prog.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
#define CHECK(cond) do { if (!(cond)) { fprintf(stderr, "%s:%d: check failed: %s\n", \
                                                 __FILE__, __LINE__, #cond); failures++; } } while (0)

static unsigned long long chain_step(unsigned long long acc, unsigned long long tag)
{
  return (acc * 1000003ULL) ^ tag;
}

/* Captures chain(acc, 5) + fill(buf, 1.0f), patches the chain node to tag 9 in the executable
 * graph and checks that launches run the patched bytes and the source graph is unchanged. */
static void graph_round_trip(CUmodule mod)
{
  CUfunction chain = prog_fn(mod, "cg_chain"), fill = prog_fn(mod, "cg_fill_f32");
  CUstream s;
  CUdeviceptr acc, buf;
  enum { N = 64 };
  CK(cuStreamCreate(&s, 0));
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemAlloc(&buf, N * sizeof(float)));
  CK(cuMemsetD8(acc, 0, 8));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  unsigned long long tag = 5;
  void *chain_p[] = { &acc, &tag };
  CK(cuLaunchKernel(chain, 1, 1, 1, 1, 1, 1, 0, s, chain_p, NULL));
  tag = 77;  /* captured bytes were copied at launch */
  CUstreamCaptureStatus status;
  const CUgraphNode *deps;
  size_t ndeps;
  CUgraph captured;
  CK(cuStreamGetCaptureInfo(s, &status, NULL, &captured, &deps, NULL, &ndeps));
  CHECK(status == CU_STREAM_CAPTURE_STATUS_ACTIVE && ndeps == 1);
  CUgraphNode chain_node = deps[0];
  float one = 1.0f;
  int n = N;
  void *fill_p[] = { &buf, &one, &n };
  CK(cuLaunchKernel(fill, 1, 1, 1, N, 1, 1, 0, s, fill_p, NULL));
  CHECK(cuStreamSynchronize(s) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUgraph g;
  CHECK(cuStreamEndCapture(s, &g) == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);  /* the sync broke it */

  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  tag = 5;
  CK(cuLaunchKernel(chain, 1, 1, 1, 1, 1, 1, 0, s, chain_p, NULL));
  CK(cuStreamGetCaptureInfo(s, &status, NULL, NULL, &deps, NULL, &ndeps));
  chain_node = deps[0];
  CK(cuLaunchKernel(fill, 1, 1, 1, N, 1, 1, 0, s, fill_p, NULL));
  CK(cuStreamEndCapture(s, &g));
  unsigned long long host = 1;
  CK(cuMemcpyDtoH(&host, acc, 8));
  CHECK(host == 0);  /* captured work did not run */

  CUDA_KERNEL_NODE_PARAMS kp;
  CK(cuGraphKernelNodeGetParams(chain_node, &kp));
  CHECK(kp.func == chain && kp.gridDimX == 1 && kp.blockDimX == 1);
  CHECK(*(unsigned long long *)kp.kernelParams[1] == 5);
  size_t count = 0;
  CK(cuGraphGetNodes(g, NULL, &count));
  CHECK(count == 2);

  CUgraphExec exec;
  CK(cuGraphInstantiate(&exec, g, 0));
  CK(cuGraphLaunch(exec, s));
  CK(cuMemcpyDtoH(&host, acc, 8));
  CHECK(host == chain_step(0, 5));
  unsigned long long patched = 9;
  void *patched_p[] = { &acc, &patched };
  kp.kernelParams = patched_p;
  CK(cuGraphExecKernelNodeSetParams(exec, chain_node, &kp));
  CK(cuGraphLaunch(exec, s));
  CK(cuMemcpyDtoH(&host, acc, 8));
  CHECK(host == chain_step(chain_step(0, 5), 9));
  CUDA_KERNEL_NODE_PARAMS again;
  CK(cuGraphKernelNodeGetParams(chain_node, &again));
  CHECK(*(unsigned long long *)again.kernelParams[1] == 5);  /* source graph untouched */
  float f[N];
  CK(cuMemcpyDtoH(f, buf, sizeof f));
  CHECK(f[0] == 1.0f && f[N - 1] == 1.0f);

  /* whole-graph update from the unpatched source: back to tag 5 */
  CUgraphExecUpdateResultInfo info;
  CK(cuGraphExecUpdate(exec, g, &info));
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
  CK(cuGraphLaunch(exec, s));
  CK(cuMemcpyDtoH(&host, acc, 8));
  CHECK(host == chain_step(chain_step(chain_step(0, 5), 9), 5));
  CUgraph empty;
  CK(cuGraphCreate(&empty, 0));
  CHECK(cuGraphExecUpdate(exec, empty, &info) == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  CK(cuGraphExecDestroy(exec));
  CK(cuGraphDestroy(g));
  CK(cuGraphDestroy(empty));
}

/* cg_grid_sum once with grid 3: eagerly ("eager"), or as a graph captured with grid 2 and
 * launched as it is ("stale") or with its node updated to grid 3 ("patched"). Returns what it
 * summed. A stale shape must change both the result and the fake's record of what ran
 * (fake-selftest compares FAKECUDA_STATS' launch_shapes of the three). */
static unsigned long long grid_sum_once(CUmodule mod, const char *how)
{
  CUfunction sum = prog_fn(mod, "cg_grid_sum");
  CUstream s;
  CUdeviceptr out, in;
  CK(cuStreamCreate(&s, 0));
  CK(cuMemAlloc(&out, 8));
  CK(cuMemAlloc(&in, 3 * 64 * sizeof(unsigned)));
  CK(cuMemsetD8(out, 0, 8));
  CK(cuMemsetD32(in, 5, 3 * 64));
  void *p[] = { &out, &in };
  if (strcmp(how, "eager") == 0) {
    CK(cuLaunchKernel(sum, 3, 1, 1, 64, 1, 1, 0, s, p, NULL));
  } else {
    CUstreamCaptureStatus status;
    const CUgraphNode *deps;
    size_t ndeps;
    CUgraph g;
    CUgraphExec exec;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CK(cuLaunchKernel(sum, 2, 1, 1, 64, 1, 1, 0, s, p, NULL));
    CK(cuStreamGetCaptureInfo(s, &status, NULL, NULL, &deps, NULL, &ndeps));
    CUgraphNode node = deps[0];
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiate(&exec, g, 0));
    if (strcmp(how, "patched") == 0) {
      CUDA_KERNEL_NODE_PARAMS kp;
      CK(cuGraphKernelNodeGetParams(node, &kp));
      kp.gridDimX = 3;
      CK(cuGraphExecKernelNodeSetParams(exec, node, &kp));
    }
    CK(cuGraphLaunch(exec, s));
  }
  unsigned long long host;
  CK(cuMemcpyDtoH(&host, out, 8));
  return host;
}

/* What a shape update may not do, refused as the real driver refuses it: a block beyond the
 * function's threads per block, dynamic shared memory above 48 KiB the function was not allowed,
 * a grid no multiple of the node's cluster dimension. */
static void shape_updates(CUmodule mod)
{
  CHECK(grid_sum_once(mod, "eager") == grid_sum_once(mod, "patched"));
  CHECK(grid_sum_once(mod, "eager") != grid_sum_once(mod, "stale"));
  CUfunction sum = prog_fn(mod, "cg_grid_sum");
  CUstream s;
  CUdeviceptr out, in;
  CK(cuStreamCreate(&s, 0));
  CK(cuMemAlloc(&out, 8));
  CK(cuMemAlloc(&in, 8 * 64 * sizeof(unsigned)));
  void *p[] = { &out, &in };
  CHECK(cuLaunchKernel(sum, 1, 1, 1, 1025, 1, 1, 0, s, p, NULL) == CUDA_ERROR_INVALID_VALUE);
  /* its launch bounds: 512 threads, a limit of this function only, and no attribute raises it */
  int max_threads = 0;
  CK(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, sum));
  CHECK(max_threads == 512);
  CHECK(cuLaunchKernel(sum, 1, 1, 1, 1024, 1, 1, 0, s, p, NULL) == CUDA_ERROR_INVALID_VALUE);
  CHECK(cuFuncSetAttribute(sum, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024) != CUDA_SUCCESS);
  CHECK(cuLaunchKernel(sum, 1, 1, 1, 64, 1, 1, 64 << 10, s, p, NULL) == CUDA_ERROR_INVALID_VALUE);
  CUlaunchAttribute cluster = { .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION };
  cluster.value.clusterDim.x = 2;
  cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
  CUlaunchConfig c = { .gridDimX = 4, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 64,
                       .blockDimY = 1, .blockDimZ = 1, .hStream = s, .attrs = &cluster,
                       .numAttrs = 1 };
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CK(cuLaunchKernelEx(&c, sum, p, NULL));
  CUstreamCaptureStatus status;
  const CUgraphNode *deps;
  size_t ndeps;
  CK(cuStreamGetCaptureInfo(s, &status, NULL, NULL, &deps, NULL, &ndeps));
  CUgraphNode node = deps[0];
  CUgraph g;
  CUgraphExec exec;
  CK(cuStreamEndCapture(s, &g));
  CK(cuGraphInstantiate(&exec, g, 0));
  CUDA_KERNEL_NODE_PARAMS kp;
  CK(cuGraphKernelNodeGetParams(node, &kp));
  kp.gridDimX = 3;
  CHECK(cuGraphExecKernelNodeSetParams(exec, node, &kp) == CUDA_ERROR_INVALID_CLUSTER_SIZE);
  kp.gridDimX = 6;
  kp.sharedMemBytes = 64 << 10;
  CHECK(cuGraphExecKernelNodeSetParams(exec, node, &kp) == CUDA_ERROR_INVALID_VALUE);
  CK(cuFuncSetAttribute(sum, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 << 10));
  CK(cuGraphExecKernelNodeSetParams(exec, node, &kp));
  CK(cuFuncSetAttribute(sum, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0));
  CK(cuGraphExecDestroy(exec));
  CK(cuGraphDestroy(g));
}

static void param_layout(CUmodule mod)
{
  CUfunction mix = prog_fn(mod, "cg_step_mix");
  size_t off, size;
  CK(cuFuncGetParamInfo(mix, 2, &off, &size));
  CHECK(off == 16 && size == 8);
  CHECK(cuFuncGetParamInfo(mix, 3, &off, &size) == CUDA_ERROR_INVALID_VALUE);
  CUlibrary lib;
  CUkernel big;
  CK(cuLibraryLoadData(&lib, kernels_ptx, NULL, NULL, 0, NULL, NULL, 0));
  CK(cuLibraryGetKernel(&big, lib, "cg_big_arg"));
  CK(cuKernelGetParamInfo(big, 1, &off, &size));
  CHECK(off == 512 && size == 8);
  CHECK(cuFuncGetParamInfo((CUfunction)big, 0, &off, &size) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(cuKernelGetParamInfo((CUkernel)mix, 0, &off, &size) == CUDA_ERROR_INVALID_HANDLE);
  CUfunction big_fn;
  CK(cuKernelGetFunction(&big_fn, big));
  CHECK(big_fn != (CUfunction)big);
  CK(cuFuncGetParamInfo(big_fn, 0, &off, &size));
  CHECK(off == 0 && size == 512);
  /* The parameter counts of newer drivers (not in this cuda.h): found by cuGetProcAddress. */
  CUresult (*func_count)(CUfunction, size_t *), (*kernel_count)(CUkernel, size_t *);
  CUdriverProcAddressQueryResult st;
  CK(cuGetProcAddress("cuFuncGetParamCount", (void **)&func_count, 13010, 0, &st));
  CK(cuGetProcAddress("cuKernelGetParamCount", (void **)&kernel_count, 13010, 0, &st));
  size_t n = 0;
  CK(func_count(mix, &n));
  CHECK(n == 3);
  CK(kernel_count(big, &n));
  CHECK(n == 2);
  CHECK(func_count((CUfunction)big, &n) == CUDA_ERROR_INVALID_HANDLE);
}

static void proc_address(void)
{
  void *fn = NULL;
  CUdriverProcAddressQueryResult st;
  CK(cuGetProcAddress("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS && fn == dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"));
  CK(cuGetProcAddress("cuLaunchKernel", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  CHECK(fn == dlsym(RTLD_DEFAULT, "cuLaunchKernel"));
  CK(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0, &st));
  CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  CHECK(cuGetProcAddress("cuMemAlloc", &fn, 3000, 0, &st) == CUDA_ERROR_NOT_FOUND);
  CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  CHECK(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &st) == CUDA_ERROR_NOT_FOUND);
  CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  CK(cuGetProcAddress("cuGetProcAddress", &fn, 13000, 0, &st));
  CHECK(fn == dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"));
}

/* FAKECUDA_FAIL=cuMemAlloc_v2:2,cuStreamQuery:2+=700 (set in main) */
static void fault_injection(void)
{
  CUdeviceptr a = 0, b = 123, c = 0;
  CK(cuMemAlloc(&a, 16));
  CHECK(cuMemAlloc(&b, 16) == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK(b == 123);  /* a failing call has no side effect */
  CK(cuMemAlloc(&c, 16));
  CHECK(a && c && a != c);
  CK(cuStreamQuery(0));
  CHECK(cuStreamQuery(0) == (CUresult)700);
  CHECK(cuStreamQuery(0) == (CUresult)700);
}

int main(int argc, char **argv)
{
  const char *shape_run = prog_opt(argc, argv, "--grid-sum");
  if (shape_run) {  /* one run of grid_sum_once, for fake-selftest */
    prog_init();
    printf("sum %llu\n", grid_sum_once(prog_module(), shape_run));
    return 0;
  }
  setenv("FAKECUDA_FAIL", "cuMemAlloc_v2:2,cuStreamQuery:2+=700", 1);
  prog_init();
  CUmodule mod = prog_module();
  fault_injection();
  graph_round_trip(mod);
  shape_updates(mod);
  param_layout(mod);
  proc_address();
  if (failures) return 1;
  printf("fakecheck ok\n");
  return 0;
}
