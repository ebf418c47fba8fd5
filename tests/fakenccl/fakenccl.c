/* A CPU libnccl.so.2 for the shim tests, one rank per communicator. Like NCCL it launches its
 * work as a kernel from inside the call (cuLaunchKernelEx with `extra`, fetched through
 * cuGetProcAddress_v2 as cudart does), on the collective's stream: at the call for a one-rank
 * communicator (NCCL's ncclLaunchOneRank, even inside a group), else at the outermost group end.
 * The data then moves on the host: the fake driver's device memory is host memory and it runs
 * everything at submission, so what this reads is exactly what the stream's earlier work wrote. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nccl.h declares ncclGroupStart() and ncclGroupEnd() without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#define TAG 0x6e63636cULL /* "nccl": the constant NCCL's kernel mixes into its accumulator */

struct ncclComm { int rank, nranks; };

static atomic_ullong stat_allreduce, stat_internal_launches;

/* --- the driver, as NCCL reaches it ------------------------------------------------------- */
static CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
static CUfunction chain;
static CUdeviceptr acc; /* the accumulator our kernel writes */
static CUresult driver_state = CUDA_ERROR_NOT_INITIALIZED;

static void driver_setup(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) = NULL;
	if (h)
		*(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
	CUresult (*load)(CUmodule *, const void *) = NULL;
	CUresult (*get_fn)(CUfunction *, CUmodule, const char *) = NULL;
	CUresult (*alloc)(CUdeviceptr *, size_t) = NULL;
	CUdriverProcAddressQueryResult q;
	if (!gpa || gpa("cuLaunchKernelEx", (void **)&launch_ex, 12000, 0, &q) != CUDA_SUCCESS ||
	    gpa("cuModuleLoadData", (void **)&load, 12000, 0, &q) != CUDA_SUCCESS ||
	    gpa("cuModuleGetFunction", (void **)&get_fn, 12000, 0, &q) != CUDA_SUCCESS ||
	    gpa("cuMemAlloc", (void **)&alloc, 12000, 0, &q) != CUDA_SUCCESS) {
		driver_state = CUDA_ERROR_NOT_FOUND;
		return;
	}
	CUmodule m;
	if ((driver_state = load(&m, "")) != CUDA_SUCCESS ||
	    (driver_state = get_fn(&chain, m, "cg_chain")) != CUDA_SUCCESS ||
	    (driver_state = alloc(&acc, sizeof(unsigned long long))) != CUDA_SUCCESS)
		return;
	*(unsigned long long *)acc = 0;
}

/* Needs the caller's context current, as NCCL does at communicator creation. */
static ncclResult_t driver_ready(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, driver_setup);
	return driver_state == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

static ncclResult_t launch(CUstream s)
{
	unsigned long long args[2] = { (unsigned long long)acc, TAG };
	size_t size = sizeof(args);
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
	                  CU_LAUNCH_PARAM_END };
	CUlaunchConfig c = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
	                     .blockDimY = 1, .blockDimZ = 1, .hStream = s };
	if (launch_ex(&c, chain, NULL, extra) != CUDA_SUCCESS)
		return ncclUnhandledCudaError;
	atomic_fetch_add(&stat_internal_launches, 1);
	return ncclSuccess;
}

/* --- collectives: queued inside a group, run at its outermost end -------------------------- */
struct allreduce { const void *send; void *recv; size_t bytes; CUstream stream; };
#define GROUP_MAX 64
static _Thread_local struct { int depth, n; struct allreduce q[GROUP_MAX]; } group;

static size_t type_size(ncclDataType_t t)
{
	switch (t) {
	case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
	case ncclFloat16: case ncclBfloat16: return 2;
	case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
	case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
	default: return 0;
	}
}

static ncclResult_t run(const struct allreduce *a)
{
	ncclResult_t r = launch(a->stream);
	if (r != ncclSuccess)
		return r;
	if (a->send != a->recv) /* one rank: every reduction is the identity */
		memmove(a->recv, a->send, a->bytes);
	atomic_fetch_add(&stat_allreduce, 1);
	return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
	size_t size = type_size(datatype);
	if (!comm || !size || (unsigned)op >= ncclNumOps || !sendbuff || !recvbuff)
		return ncclInvalidArgument;
	struct allreduce a = { sendbuff, recvbuff, count * size, (CUstream)stream };
	if (group.depth == 0 || comm->nranks == 1) /* NCCL launches one-rank work at the call */
		return run(&a);
	if (group.n == GROUP_MAX)
		return ncclInvalidUsage;
	group.q[group.n++] = a;
	return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
	group.depth++;
	return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
	if (group.depth == 0)
		return ncclInvalidUsage;
	if (--group.depth > 0)
		return ncclSuccess;
	ncclResult_t r = ncclSuccess;
	for (int i = 0; i < group.n && r == ncclSuccess; i++)
		r = run(&group.q[i]);
	group.n = 0;
	return r;
}

/* --- communicators and queries ------------------------------------------------------------ */
static ncclResult_t comm_new(ncclComm_t *comm, int nranks, int rank)
{
	if (!comm || nranks != 1 || rank != 0)
		return ncclInvalidArgument;
	ncclResult_t r = driver_ready();
	if (r != ncclSuccess)
		return r;
	if (!(*comm = calloc(1, sizeof(**comm))))
		return ncclSystemError;
	(*comm)->nranks = nranks;
	return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	return comm_new(comm, nranks, rank);
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
	if (devlist && devlist[0] != 0)
		return ncclInvalidArgument;
	return comm_new(comm, ndev, 0);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	free(comm);
	return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	if (!comm || !count)
		return ncclInvalidArgument;
	*count = 1;
	return ncclSuccess;
}

ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
	if (!uniqueId)
		return ncclInvalidArgument;
	memset(uniqueId, 0, sizeof(*uniqueId));
	memcpy(uniqueId->internal, "fakenccl", 8);
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error";
	case ncclSystemError: return "unhandled system error";
	case ncclInvalidArgument: return "invalid argument";
	case ncclInvalidUsage: return "invalid usage";
	default: return "unknown result code";
	}
}

/* FAKENCCL_STATS=path: counters written at exit, one `name value` a line. */
__attribute__((destructor)) static void write_stats(void)
{
	const char *path = getenv("FAKENCCL_STATS");
	FILE *f = path && *path ? fopen(path, "w") : NULL;
	if (!f)
		return;
	fprintf(f, "allreduce %llu\ninternal_launches %llu\n", atomic_load(&stat_allreduce),
	        atomic_load(&stat_internal_launches));
	fclose(f);
}
