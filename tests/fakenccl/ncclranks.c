/* Self-test of the fake NCCL's multi-rank semantics, 3 ranks as 3 forked processes (forked
 * before any CUDA call): every collective, type and reduction op against values computed here,
 * groups, ncclCommSplit (a 2-rank and a 1-rank child, NOCOLOR), a shape mismatch, ncclCommAbort
 * waking a blocked call here and failing the peer's, and the init timeout. Exit 0 iff every
 * check passed on every rank. */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h: ncclGroupStart() */
#include <nccl.h>
#pragma GCC diagnostic pop

enum { NR = 3, COUNT = 6 };
static int rank, failures;
static CUstream s;
static CUcontext ctx;

#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
  fprintf(stderr, "rank %d: FAIL line %d: ", rank, __LINE__); fprintf(stderr, __VA_ARGS__); \
  fputc('\n', stderr); } } while (0)
#define NK(call) do { ncclResult_t r_ = (call); CHECK(r_ == ncclSuccess, "%s: %s", #call, \
  ncclGetErrorString(r_)); } while (0)

static void *dev_alloc(size_t n)
{
  CUdeviceptr p;
  if (cuMemAlloc(&p, n) != CUDA_SUCCESS) { fprintf(stderr, "cuMemAlloc failed\n"); exit(1); }
  return (void *)p; /* the fake driver's device memory is host memory */
}

static double now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Rank r's element i: 1..4, so sums and products of 3 ranks fit every type exactly. */
#define VAL(r, i) ((r) + 1 + (i) % 2)

/* All-reduce of every op on type T: the result against the same op done here in T. */
#define ALLREDUCE_TYPE(T, dt)                                                           \
  do {                                                                                  \
    T *in = dev_alloc(COUNT * sizeof(T)), *out = dev_alloc(COUNT * sizeof(T));           \
    for (int op = ncclSum; op < ncclNumOps; op++) {                                     \
      for (int i = 0; i < COUNT; i++) in[i] = (T)VAL(rank, i);                          \
      NK(ncclAllReduce(in, out, COUNT, dt, (ncclRedOp_t)op, comm, s));                  \
      for (int i = 0; i < COUNT; i++) {                                                 \
        T a = (T)VAL(0, i);                                                             \
        for (int r = 1; r < NR; r++) {                                                  \
          T b = (T)VAL(r, i);                                                           \
          a = op == ncclProd ? (T)(a * b) : op == ncclMax ? (b > a ? b : a)             \
            : op == ncclMin ? (b < a ? b : a) : (T)(a + b);                             \
        }                                                                               \
        if (op == ncclAvg) a = (T)(a / (T)NR);                                          \
        CHECK(out[i] == a, "allreduce %s op %d [%d]: %g, want %g", #T, op, i,           \
              (double)out[i], (double)a);                                               \
      }                                                                                 \
    }                                                                                   \
  } while (0)

static void *blocked_allreduce(void *comm)
{
  static ncclResult_t r;
  static int buf[4];
  r = cuCtxSetCurrent(ctx) == CUDA_SUCCESS ? ncclAllReduce(buf, buf, 4, ncclInt32, ncclSum, comm, s)
                                           : ncclUnhandledCudaError;
  return &r;
}

static void run_rank(ncclUniqueId id)
{
  CUdevice dev;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
      cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    fprintf(stderr, "rank %d: no CUDA\n", rank);
    exit(1);
  }
  ncclComm_t comm;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  NK(ncclCommInitRankConfig(&comm, NR, id, rank, &config));
  int n = 0, me = -1;
  NK(ncclCommCount(comm, &n));
  NK(ncclCommUserRank(comm, &me));
  CHECK(n == NR && me == rank, "count %d rank %d", n, me);

  ALLREDUCE_TYPE(int8_t, ncclInt8);
  ALLREDUCE_TYPE(uint8_t, ncclUint8);
  ALLREDUCE_TYPE(int32_t, ncclInt32);
  ALLREDUCE_TYPE(uint32_t, ncclUint32);
  ALLREDUCE_TYPE(int64_t, ncclInt64);
  ALLREDUCE_TYPE(uint64_t, ncclUint64);
  ALLREDUCE_TYPE(float, ncclFloat32);
  ALLREDUCE_TYPE(double, ncclFloat64);

  int *x = dev_alloc(NR * COUNT * sizeof(int)), *y = dev_alloc(NR * COUNT * sizeof(int));
  for (int i = 0; i < COUNT; i++) x[i] = 100 * rank + i;
  NK(ncclBroadcast(x, y, COUNT, ncclInt32, NR - 1, comm, s));
  for (int i = 0; i < COUNT; i++) CHECK(y[i] == 100 * (NR - 1) + i, "broadcast [%d] %d", i, y[i]);
  NK(ncclBcast(x, COUNT, ncclInt32, 0, comm, s));
  for (int i = 0; i < COUNT; i++) CHECK(x[i] == i, "bcast [%d] %d", i, x[i]);

  for (int i = 0; i < COUNT; i++) x[i] = rank + i;
  y[0] = -1;
  NK(ncclReduce(x, y, COUNT, ncclInt32, ncclSum, 1, comm, s));
  for (int i = 0; rank == 1 && i < COUNT; i++) CHECK(y[i] == 3 + 3 * i, "reduce [%d] %d", i, y[i]);
  CHECK(rank == 1 || y[0] == -1, "reduce wrote a non-root's buffer");

  for (int i = 0; i < COUNT; i++) x[i] = 10 * rank + i;
  NK(ncclAllGather(x, y, COUNT, ncclInt32, comm, s));
  for (int i = 0; i < NR * COUNT; i++) CHECK(y[i] == 10 * (i / COUNT) + i % COUNT, "allgather [%d] %d", i, y[i]);
  memcpy(y + rank * COUNT, x, COUNT * sizeof(int)); /* in place: send is recv's own chunk */
  NK(ncclAllGather(y + rank * COUNT, y, COUNT, ncclInt32, comm, s));
  for (int i = 0; i < NR * COUNT; i++) CHECK(y[i] == 10 * (i / COUNT) + i % COUNT, "in-place allgather [%d] %d", i, y[i]);

  for (int i = 0; i < NR * COUNT; i++) x[i] = rank * i;
  NK(ncclReduceScatter(x, y, COUNT, ncclInt32, ncclMax, comm, s));
  for (int i = 0; i < COUNT; i++) CHECK(y[i] == (NR - 1) * (rank * COUNT + i), "reducescatter [%d] %d", i, y[i]);

  /* a group: multi-rank calls run at its end, in order */
  for (int i = 0; i < COUNT; i++) x[i] = rank;
  NK(ncclGroupStart());
  NK(ncclAllReduce(x, y, COUNT, ncclInt32, ncclSum, comm, s));
  NK(ncclAllReduce(y, y, COUNT, ncclInt32, ncclSum, comm, s));
  CHECK(y[0] != 3 * (0 + 1 + 2), "group: ran before ncclGroupEnd");
  NK(ncclGroupEnd());
  CHECK(y[0] == 3 * (0 + 1 + 2), "group: %d, want %d", y[0], 3 * (0 + 1 + 2));

  /* split: even ranks (0, 2) in reverse order by key, rank 1 alone; then NOCOLOR */
  ncclComm_t sub = NULL, none = (ncclComm_t)1;
  NK(ncclCommSplit(comm, rank % 2, -rank, &sub, NULL));
  CHECK(sub != NULL, "split gave no communicator");
  if (sub) {
    NK(ncclCommCount(sub, &n));
    NK(ncclCommUserRank(sub, &me));
    CHECK(n == (rank % 2 ? 1 : 2) && me == (rank == 0 ? 1 : 0), "split: count %d rank %d", n, me);
    for (int i = 0; i < COUNT; i++) x[i] = rank;
    NK(ncclAllReduce(x, y, COUNT, ncclInt32, ncclSum, sub, s));
    CHECK(y[0] == (rank % 2 ? 1 : 2), "split allreduce %d", y[0]);
    NK(ncclCommDestroy(sub));
  }
  NK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 0, 0, &none, NULL));
  CHECK((rank == 0) == (none == NULL), "NOCOLOR: %p", (void *)none);
  if (none) NK(ncclCommDestroy(none));

  /* a shape mismatch breaks the comm on every rank */
  ncclComm_t bad;
  NK(ncclCommSplit(comm, 0, rank, &bad, NULL));
  ncclResult_t r = ncclAllReduce(x, y, rank == 2 ? 2 : 3, ncclInt32, ncclSum, bad, s), async;
  NK(ncclCommGetAsyncError(bad, &async));
  CHECK(r == ncclInvalidUsage && async == ncclInvalidUsage, "mismatch: %d, async %d", r, async);
  NK(ncclCommDestroy(bad));

  /* abort: rank 0 blocks in a call rank 1 never makes; aborting wakes it, rank 1 then fails */
  ncclComm_t ab;
  NK(ncclCommSplit(comm, rank == 2 ? NCCL_SPLIT_NOCOLOR : 0, rank, &ab, NULL));
  if (rank == 0) {
    pthread_t t;
    void *res;
    pthread_create(&t, NULL, blocked_allreduce, ab);
    nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
    double t0 = now_s();
    NK(ncclCommAbort(ab));
    pthread_join(t, &res);
    CHECK(*(ncclResult_t *)res == ncclSystemError, "blocked call after abort: %d", *(ncclResult_t *)res);
    CHECK(now_s() - t0 < 1, "abort took %.2f s", now_s() - t0);
  }
  NK(ncclAllReduce(x, y, 1, ncclInt32, ncclSum, comm, s)); /* rank 1 waits for the abort */
  if (rank == 1) {
    double t0 = now_s();
    r = ncclAllReduce(x, y, 4, ncclInt32, ncclSum, ab, s);
    CHECK(r == ncclRemoteError && now_s() - t0 < 1, "peer aborted: %d after %.2f s", r, now_s() - t0);
    NK(ncclCommDestroy(ab));
  }

  /* init waits for all ranks, at most FAKENCCL_TIMEOUT_MS */
  if (rank == 2) {
    ncclUniqueId lone;
    ncclComm_t c;
    NK(ncclGetUniqueId(&lone));
    setenv("FAKENCCL_TIMEOUT_MS", "300", 1);
    double t0 = now_s();
    r = ncclCommInitRank(&c, 2, lone, 0);
    CHECK(r == ncclSystemError && now_s() - t0 < 2, "lone init: %d after %.2f s", r, now_s() - t0);
  }
  NK(ncclCommDestroy(comm));
}

int main(void)
{
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  pid_t pid[NR];
  for (int r = 0; r < NR; r++) {
    if ((pid[r] = fork()) == 0) {
      rank = r;
      run_rank(id);
      _exit(failures ? 1 : 0);
    }
  }
  int bad = 0;
  for (int r = 0; r < NR; r++) {
    int st;
    waitpid(pid[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "rank %d failed (status %#x)\n", r, st);
      bad = 1;
    }
  }
  printf("%s\n", bad ? "FAIL" : "ok: 3 ranks, all checks passed");
  return bad;
}
