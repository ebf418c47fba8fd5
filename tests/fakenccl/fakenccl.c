/* A CPU libnccl.so.2 for the shim tests: collectives over communicators of one or more ranks
 * (processes, comm.c). Like NCCL it launches its work from inside the call, on the collective's
 * stream: one internal kernel (cuLaunchKernelEx with `extra`, fetched through cuGetProcAddress_v2
 * as cudart does), then the data movement as a host function, so that the work happens when the
 * stream executes it. One-rank calls launch at the call (NCCL's ncclLaunchOneRank, even inside
 * a group), multi-rank ones at the outermost ncclGroupEnd. The fake driver runs stream work at
 * submission on host memory, so what this reads is what the stream's earlier work wrote. */
#define _GNU_SOURCE
#include "fakenccl.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#define TAG 0x6e63636cULL /* "nccl": the constant NCCL's kernel mixes into its accumulator */

static atomic_ullong stat_calls, stat_internal_launches, stat_run[FN_SPLIT];
static const char *const kind_name[FN_SPLIT] = { "allreduce", "broadcast", "reduce", "allgather",
                                                  "reducescatter" };

/* --- the driver, as NCCL reaches it ------------------------------------------------------- */
static CUresult (*launch_ex)(const CUlaunchConfig *, CUfunction, void **, void **);
static CUresult (*host_func)(CUstream, CUhostFn, void *);
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
	    gpa("cuLaunchHostFunc", (void **)&host_func, 12000, 0, &q) != CUDA_SUCCESS ||
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
ncclResult_t fn_driver_ready(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, driver_setup);
	return driver_state == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

/* --- one collective as called ------------------------------------------------------------- */
/* Interned per communicator: the host function's argument must outlive the call, since a
 * captured collective replays it at every graph launch (as NCCL's persistent plans do). */
struct fn_call {
	struct fn_call *next;
	struct ncclComm *comm;
	enum fn_kind kind;
	const void *send;
	void *recv;
	size_t count; /* per rank: sendcount of all-gather, recvcount of reduce-scatter */
	ncclDataType_t dtype;
	ncclRedOp_t op;
	int root;
};

static struct fn_call *intern(const struct fn_call *k)
{
	struct fn_call *e;
	for (e = k->comm->calls; e; e = e->next)
		if (e->kind == k->kind && e->send == k->send && e->recv == k->recv &&
		    e->count == k->count && e->dtype == k->dtype && e->op == k->op && e->root == k->root)
			return e;
	if ((e = malloc(sizeof(*e)))) {
		*e = *k;
		e->next = k->comm->calls;
		k->comm->calls = e;
	}
	return e;
}

void fn_calls_free(struct ncclComm *c)
{
	for (struct fn_call *e = c->calls, *next; e; e = next) {
		next = e->next;
		free(e);
	}
}

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

static int reduces(enum fn_kind k)
{
	return k == FN_ALLREDUCE || k == FN_REDUCE || k == FN_REDUCESCATTER;
}

/* dst[i] = op over ranks, in rank order (so every rank computes bitwise the same result), of
 * src[r][i]; avg divides the sum by the number of ranks. */
#define REDUCE_AS(T)                                                                        \
	do {                                                                                \
		T *d = dst;                                                                 \
		for (size_t i = 0; i < count; i++) {                                        \
			T a = ((const T *)src[0])[i];                                       \
			for (int r = 1; r < n; r++) {                                       \
				T b = ((const T *)src[r])[i];                               \
				a = op == ncclProd ? (T)(a * b)                             \
				  : op == ncclMax  ? (b > a ? b : a)                        \
				  : op == ncclMin  ? (b < a ? b : a)                        \
				                   : (T)(a + b);                            \
			}                                                                   \
			d[i] = op == ncclAvg ? (T)(a / (T)n) : a;                           \
		}                                                                           \
	} while (0)

static void reduce(void *dst, const void *const src[], int n, size_t count, ncclDataType_t t,
                   ncclRedOp_t op)
{
	switch (t) {
	case ncclInt8: REDUCE_AS(int8_t); break;
	case ncclUint8: REDUCE_AS(uint8_t); break;
	case ncclInt32: REDUCE_AS(int32_t); break;
	case ncclUint32: REDUCE_AS(uint32_t); break;
	case ncclInt64: REDUCE_AS(int64_t); break;
	case ncclUint64: REDUCE_AS(uint64_t); break;
	case ncclFloat32: REDUCE_AS(float); break;
	case ncclFloat64: REDUCE_AS(double); break;
	default: break; /* refused at the call */
	}
}

static int reducible(ncclDataType_t t)
{
	return t != ncclFloat16 && t != ncclBfloat16 && t != ncclFloat8e4m3 && t != ncclFloat8e5m2;
}

/* Bytes this rank contributes to the exchange. */
static size_t posted_bytes(const struct fn_call *k)
{
	size_t b = k->count * type_size(k->dtype);
	if (k->kind == FN_BROADCAST)
		return k->comm->rank == k->root ? b : 0;
	return k->kind == FN_REDUCESCATTER ? b * (size_t)k->comm->nranks : b;
}

static ncclResult_t run_ranks(const struct fn_call *k)
{
	struct ncclComm *c = k->comm;
	struct fn_post p = { k->kind, k->dtype, k->op, k->root, k->count, posted_bytes(k) };
	const void *in[FN_MAX_RANKS];
	ncclResult_t r = fn_exchange(c, &p, k->send, in);
	if (r != ncclSuccess)
		return r;
	size_t b = k->count * type_size(k->dtype);
	switch (k->kind) {
	case FN_ALLREDUCE:
		reduce(k->recv, in, c->nranks, k->count, k->dtype, k->op);
		break;
	case FN_REDUCE:
		if (c->rank == k->root)
			reduce(k->recv, in, c->nranks, k->count, k->dtype, k->op);
		break;
	case FN_BROADCAST:
		memcpy(k->recv, in[k->root], b);
		break;
	case FN_ALLGATHER:
		for (int i = 0; i < c->nranks; i++)
			memcpy((char *)k->recv + i * b, in[i], b);
		break;
	case FN_REDUCESCATTER:
		for (int i = 0; i < c->nranks; i++)
			in[i] = (const char *)in[i] + c->rank * b;
		reduce(k->recv, in, c->nranks, k->count, k->dtype, k->op);
		break;
	case FN_SPLIT:
		break;
	}
	return ncclSuccess;
}

/* The host function: the collective's data movement, when the stream reaches it. A failure
 * breaks the communicator, which the call (when eager) or later calls return. */
static void execute(void *arg)
{
	const struct fn_call *k = arg;
	struct ncclComm *c = k->comm;
	atomic_fetch_add(&c->busy, 1);
	ncclResult_t r = ncclSuccess;
	if (c->nranks > 1)
		r = run_ranks(k);
	else if (k->send != k->recv && k->recv) /* one rank: every collective is a copy */
		memmove(k->recv, k->send, k->count * type_size(k->dtype));
	if (r == ncclSuccess)
		atomic_fetch_add(&stat_run[k->kind], 1);
	atomic_fetch_sub(&c->busy, 1);
}

static ncclResult_t launch(const struct fn_call *k, CUstream s)
{
	struct ncclComm *c = k->comm;
	struct fn_call *rec = intern(k);
	if (!rec)
		return ncclSystemError;
	unsigned long long args[2] = { (unsigned long long)acc, TAG };
	size_t size = sizeof(args);
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
	                  CU_LAUNCH_PARAM_END };
	CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1,
	                       .blockDimY = 1, .blockDimZ = 1, .hStream = s };
	if (launch_ex(&cfg, chain, NULL, extra) != CUDA_SUCCESS)
		return ncclUnhandledCudaError;
	atomic_fetch_add(&stat_internal_launches, 1);
	if (host_func(s, execute, rec) != CUDA_SUCCESS)
		return ncclUnhandledCudaError;
	/* The fake driver ran the host function at submission: its failure is this call's. */
	return (ncclResult_t)atomic_load(&c->error);
}

/* --- fault knob ---------------------------------------------------------------------------- */
/* FAKENCCL_STALL=<rank>:<n>: that rank's n-th collective call (any communicator) never returns
 * and posts nothing, like a hung peer. The test kills it. */
static void stall_point(void)
{
	unsigned long long n = atomic_fetch_add(&stat_calls, 1) + 1;
	const char *e = getenv("FAKENCCL_STALL");
	int rank;
	unsigned long long at;
	if (!e || sscanf(e, "%d:%llu", &rank, &at) != 2 || rank != fn_process_rank() || n != at)
		return;
	char msg[96];
	int len = snprintf(msg, sizeof(msg), "fakenccl: rank %d stalls at collective call %llu\n",
	                   rank, n);
	if (write(2, msg, (size_t)len) < 0) { /* nothing to do: we are about to hang anyway */ }
	for (;;)
		pause();
}

/* --- collectives: queued inside a group, run at its outermost end -------------------------- */
#define GROUP_MAX 64
static _Thread_local struct {
	int depth, n;
	struct { struct fn_call k; CUstream s; } q[GROUP_MAX];
} group;

static ncclResult_t collective(struct fn_call k, cudaStream_t stream)
{
	stall_point();
	struct ncclComm *c = k.comm;
	size_t size = type_size(k.dtype);
	if (!c || !size || (reduces(k.kind) && (unsigned)k.op >= ncclNumOps) ||
	    (k.kind != FN_BROADCAST && !k.send) || (k.kind != FN_REDUCE && !k.recv) ||
	    k.root < 0 || k.root >= c->nranks)
		return ncclInvalidArgument;
	if (c->nranks > 1 && reduces(k.kind) && !reducible(k.dtype))
		return fn_fail(c, ncclInvalidArgument, "the fake cannot reduce 16- or 8-bit floats");
	if (c->nranks > 1 && posted_bytes(&k) > FN_SLOT_BYTES)
		return ncclInvalidArgument;
	if (atomic_load(&c->error) != ncclSuccess)
		return (ncclResult_t)atomic_load(&c->error);
	if (group.depth > 0 && c->nranks > 1) {
		if (group.n == GROUP_MAX)
			return ncclInvalidUsage;
		group.q[group.n].k = k;
		group.q[group.n++].s = (CUstream)stream;
		return ncclSuccess;
	}
	atomic_fetch_add(&c->busy, 1);
	ncclResult_t r = launch(&k, (CUstream)stream);
	atomic_fetch_sub(&c->busy, 1);
	return r;
}

#define CALL(...) ((struct fn_call){ .kind = __VA_ARGS__ })

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
	return collective(CALL(FN_ALLREDUCE, .comm = comm, .send = sendbuff, .recv = recvbuff,
	                       .count = count, .dtype = datatype, .op = op), stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
	if (comm && comm->rank != root)
		recvbuff = NULL; /* only the root's receive buffer is used (and it need not exist) */
	return collective(CALL(FN_REDUCE, .comm = comm, .send = sendbuff, .recv = recvbuff,
	                       .count = count, .dtype = datatype, .op = op, .root = root), stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
	if (comm && comm->rank == root && !sendbuff)
		return ncclInvalidArgument;
	return collective(CALL(FN_BROADCAST, .comm = comm, .send = sendbuff, .recv = recvbuff,
	                       .count = count, .dtype = datatype, .root = root), stream);
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream)
{
	return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	return collective(CALL(FN_ALLGATHER, .comm = comm, .send = sendbuff, .recv = recvbuff,
	                       .count = sendcount, .dtype = datatype), stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
	return collective(CALL(FN_REDUCESCATTER, .comm = comm, .send = sendbuff, .recv = recvbuff,
	                       .count = recvcount, .dtype = datatype, .op = op), stream);
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
	for (int i = 0; i < group.n && r == ncclSuccess; i++) {
		struct ncclComm *c = group.q[i].k.comm;
		atomic_fetch_add(&c->busy, 1);
		r = launch(&group.q[i].k, group.q[i].s);
		atomic_fetch_sub(&c->busy, 1);
	}
	group.n = 0;
	return r;
}

/* --- versions, errors, stats -------------------------------------------------------------- */
ncclResult_t ncclGetVersion(int *version)
{
	if (!version)
		return ncclInvalidArgument;
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error";
	case ncclSystemError: return "unhandled system error";
	case ncclInternalError: return "internal error";
	case ncclInvalidArgument: return "invalid argument";
	case ncclInvalidUsage: return "invalid usage";
	case ncclRemoteError: return "remote process exited or there was a network error";
	default: return "unknown result code";
	}
}

/* NCCL_GRAPH_REGISTER as the first communicator's creation saw it ("unset" when it was). */
static char graph_register[32];
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static void read_settings(void)
{
	const char *v = getenv("NCCL_GRAPH_REGISTER");
	snprintf(graph_register, sizeof(graph_register), "%s", v ? v : "unset");
}

void fn_read_settings(void)
{
	pthread_once(&settings_once, read_settings);
}

/* FAKENCCL_STATS=path (%r: the process's rank): counters written at exit, `name value` a line:
 * internal_launches (kernels NCCL launched), calls (collective calls), per collective kind the
 * executions that completed, and graph_register (NCCL_GRAPH_REGISTER as read; "none" without
 * a communicator). */
__attribute__((destructor)) static void write_stats(void)
{
	const char *tmpl = getenv("FAKENCCL_STATS");
	if (!tmpl || !*tmpl)
		return;
	char path[4096];
	size_t n = 0;
	for (const char *p = tmpl; *p && n + 16 < sizeof(path); p++) {
		if (p[0] == '%' && p[1] == 'r') {
			n += (size_t)snprintf(path + n, sizeof(path) - n, "%d", fn_process_rank());
			p++;
		} else {
			path[n++] = *p;
		}
	}
	path[n] = 0;
	FILE *f = fopen(path, "w");
	if (!f)
		return;
	fprintf(f, "internal_launches %llu\ncalls %llu\n", atomic_load(&stat_internal_launches),
	        atomic_load(&stat_calls));
	for (int k = 0; k < FN_SPLIT; k++)
		fprintf(f, "%s %llu\n", kind_name[k], atomic_load(&stat_run[k]));
	fprintf(f, "graph_register %s\n", graph_register[0] ? graph_register : "none");
	fclose(f);
}
