/* lifecycle: program shapes that stress how a deferring shim ends and hands work over.
 *   --mode exit-no-cleanup  launch work and return from main without sync or frees
 *   --mode ctx-destroy      destroy a created context mid-run, create another and continue
 *   --mode thread-exit      a second thread calls exit() while main is launching
 *   --mode exit-order       a second thread calls exit() with work pending on two streams; a
 *                           kernel of the one (cg_wait_flag) holds the exit work until main has
 *                           launched on the other and read it (`window 1`: main launched after
 *                           exit() began): that launch must run after the stream's earlier work
 *   --mode spin             the host spins on host-mapped memory a kernel writes (5 s timeout,
 *                           `spin timeout`, exit 3): only progress without a sync ends it
 *   --mode spin-ptds        the same on the per-thread default stream
 *   --mode ptds-threads     threads that end with work deferred on their per-thread streams
 *   --mode capture          the program captures a graph itself and launches it 10 times
 *   --mode capture-ptds     the same on the per-thread default stream, through _ptsz with stream 0
 *   --mode managed          the accumulator lives in managed memory (CPU-offload style)
 *   --mode idle             ten rounds of launches and a sync, then half a second with no driver call
 *   --mode fork-start       main fork()s again and again while a thread makes the program's first
 *                           call a shim wraps (the one that starts it); each child makes one such
 *                           call and must end (`forked <n> during <m>`: m forks fell inside it)
 *   --mode padding          the same arguments every iteration to a kernel whose parameters
 *                           have padding (cg_step_mix), with the stack scribbled between launches
 * Prints `checksum <hex>` (and `launches <n>` where the count is fixed). */
#include "prog.h"
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct setup { CUmodule mod; CUfunction chain, mix, flag; CUstream s; CUdeviceptr acc; };

static struct setup setup(void)
{
  struct setup k;
  k.mod = prog_module();
  k.chain = prog_fn(k.mod, "cg_chain");
  k.mix = prog_fn(k.mod, "cg_step_mix");
  k.flag = prog_fn(k.mod, "cg_set_flag");
  CK(cuStreamCreate(&k.s, CU_STREAM_DEFAULT));
  CK(cuMemAlloc(&k.acc, 8));
  CK(cuMemsetD8(k.acc, 0, 8));
  return k;
}

static void chain(const struct setup *k, CUstream s, CUdeviceptr acc, unsigned long long tag)
{
  void *p[] = { (void *)&acc, &tag };
  CK(cuLaunchKernel(k->chain, 1, 1, 1, 1, 1, 1, 0, s, p, NULL));
}

static unsigned long long read_acc(CUstream s, CUdeviceptr acc)
{
  unsigned long long v;
  CK(cuStreamSynchronize(s));
  CK(cuMemcpyDtoH(&v, acc, sizeof v));
  return v;
}

static int exit_no_cleanup(void)
{
  struct setup k = setup();
  unsigned long long h = 14695981039346656037ULL;
  for (int i = 0; i < 100; i++) {
    chain(&k, k.s, k.acc, (unsigned long long)i);
    if (i == 49) h = prog_mix(h, read_acc(k.s, k.acc));
  }
  printf("checksum %016llx\nlaunches 100\n", h);
  return 0;  /* the last 50 launches are never synchronised */
}

/* CPU-offload style: the accumulator lives in managed memory. */
static int managed(void)
{
  struct setup k = setup();
  CUdeviceptr acc;
  CK(cuMemAllocManaged(&acc, 8, CU_MEM_ATTACH_GLOBAL));
  CK(cuMemsetD8(acc, 0, 8));
  unsigned long long h = 14695981039346656037ULL;
  for (int i = 0; i < 60; i++) {
    for (int j = 0; j < 8; j++)
      chain(&k, k.s, acc, (unsigned long long)(i * 8 + j));
    h = prog_mix(h, read_acc(k.s, acc));
  }
  printf("checksum %016llx\nlaunches 480\n", h);
  return 0;
}

/* Writes `v`-dependent bytes over the stack below the caller, where the next call's locals
 * (and an interposed launch wrapper's) will lie. */
static __attribute__((noinline)) void scribble(unsigned v)
{
  volatile unsigned char junk[32768];
  for (unsigned i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(v * 131 + i);
}

/* Nothing changes between iterations but the bytes the stack held before each launch: a replay
 * must patch nothing (padding between parameters is no argument). */
static int padding(void)
{
  struct setup k = setup();
  CUdeviceptr p;
  CK(cuMemAlloc(&p, 64 * sizeof(float)));
  CK(cuMemsetD32(p, 0, 64));
  int n = 64;
  unsigned long long step = 7;  /* cg_step_mix(float *, int, unsigned long long): 4 padding bytes */
  void *mix[] = { &p, &n, &step };
  unsigned long long h = 14695981039346656037ULL;
  for (int i = 0; i < 60; i++) {
    for (int j = 0; j < 4; j++) {
      scribble((unsigned)(i * 4 + j));
      CK(cuLaunchKernel(k.mix, 1, 1, 1, 64, 1, 1, 0, k.s, mix, NULL));
      scribble((unsigned)(i * 4 + j) ^ 0x55);
      chain(&k, k.s, k.acc, 3);
    }
    h = prog_mix(h, read_acc(k.s, k.acc));
  }
  h = prog_mix_device(h, p, 64 * sizeof(float));
  printf("checksum %016llx\nlaunches 480\n", h);
  return 0;
}

static int ctx_destroy(void)
{
  unsigned long long h = 14695981039346656037ULL;
  for (int round = 0; round < 2; round++) {
    CUcontext ctx;
    CK(cuCtxCreate(&ctx, NULL, 0, 0));
    struct setup k = setup();
    for (int it = 0; it < 20; it++) {
      for (int j = 0; j < 5; j++) chain(&k, k.s, k.acc, (unsigned long long)(round << 16 | it << 4 | j));
      h = prog_mix(h, read_acc(k.s, k.acc));
    }
    for (int j = 0; j < 7; j++) chain(&k, k.s, k.acc, 99);  /* pending when the context dies */
    CK(cuCtxDestroy(ctx));
  }
  printf("checksum %016llx\nlaunches %d\n", h, 2 * (20 * 5 + 7));
  return 0;
}

static atomic_int main_progress;
static CUcontext shared_ctx;

static void *exiting_worker(void *arg)
{
  const struct setup *k = arg;
  while (atomic_load(&main_progress) < 1000) {}
  CK(cuCtxSetCurrent(shared_ctx));
  CUstream s;
  CUdeviceptr acc;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemsetD8(acc, 0, 8));
  for (int i = 0; i < 50; i++) chain(k, s, acc, (unsigned long long)i);
  printf("checksum %016llx\n", prog_mix(14695981039346656037ULL, read_acc(s, acc)));
  fflush(stdout);
  exit(0);  /* while main is mid-loop */
}

static int thread_exit(CUcontext ctx)
{
  struct setup k = setup();
  shared_ctx = ctx;
  pthread_t t;
  if (pthread_create(&t, NULL, exiting_worker, &k) != 0) { fprintf(stderr, "pthread_create\n"); return 1; }
  for (int i = 0; i < 10000000; i++) {
    chain(&k, k.s, k.acc, (unsigned long long)i);
    if (i % 100 == 99) CK(cuStreamSynchronize(k.s));
    atomic_store(&main_progress, i);
  }
  fprintf(stderr, "thread-exit: the worker never exited\n");
  return 1;
}

/* exit-order: x is first used after k.s, so a shim that keeps its streams newest first
 * meets x first at exit, and stops inside x's cg_wait_flag with k.s's work still pending. */
struct exit_order { const struct setup *k; CUcontext ctx; CUstream x; CUdeviceptr xacc;
                    CUfunction wait; CUdeviceptr dflag; atomic_int exiting; };

static void wait_flag(const struct exit_order *e, int v)
{
  void *p[] = { (void *)&e->dflag, &v };
  CK(cuLaunchKernel(e->wait, 1, 1, 1, 1, 1, 1, 0, e->x, p, NULL));
}

static void *exit_order_worker(void *arg)
{
  struct exit_order *e = arg;
  CK(cuCtxSetCurrent(e->ctx));
  chain(e->k, e->x, e->xacc, 1000);
  wait_flag(e, 1);  /* eager: waits here for main; deferred: waits inside exit() */
  atomic_store(&e->exiting, 1);
  exit(0);
}

static int exit_order(CUcontext ctx)
{
  struct setup k = setup();
  CUdeviceptr acc;
  unsigned long long *hacc;
  int *flag;
  CK(cuMemHostAlloc((void **)&hacc, sizeof *hacc, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  CK(cuMemHostGetDevicePointer(&acc, hacc, 0));
  CK(cuMemHostAlloc((void **)&flag, 2 * sizeof *flag, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  struct exit_order e = { .k = &k, .ctx = ctx, .wait = prog_fn(k.mod, "cg_wait_flag") };
  CK(cuMemHostGetDevicePointer(&e.dflag, flag, 0));
  CK(cuStreamCreate(&e.x, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&e.xacc, 8));
  *hacc = 0;
  flag[0] = flag[1] = 0;
  for (int it = 0; it < 20; it++) {
    for (int j = 0; j < 4; j++) chain(&k, k.s, acc, (unsigned long long)(it << 4 | j));
    chain(&k, e.x, e.xacc, (unsigned long long)it);
    wait_flag(&e, 0);
    chain(&k, e.x, e.xacc, (unsigned long long)it);
    CK(cuStreamSynchronize(e.x));
    CK(cuStreamSynchronize(k.s));
  }
  for (int j = 0; j < 3; j++) chain(&k, k.s, acc, (unsigned long long)(20 << 4 | j));
  __atomic_store_n(&flag[1], 0, __ATOMIC_RELEASE);  /* every cg_wait_flag so far has run */
  pthread_t t;
  if (pthread_create(&t, NULL, exit_order_worker, &e) != 0) { fprintf(stderr, "pthread_create\n"); return 1; }
  while (__atomic_load_n(&flag[1], __ATOMIC_ACQUIRE) == 0) sched_yield();
  int window = atomic_load(&e.exiting);
  /* Only calls on k.s (its state is this thread's to find): the exit work holds the rest. */
  chain(&k, k.s, acc, 0xe0f);
  CK(cuStreamSynchronize(k.s));
  printf("checksum %016llx\nwindow %d\n", prog_mix(14695981039346656037ULL, *hacc), window);
  fflush(stdout);
  __atomic_store_n(&flag[0], 1, __ATOMIC_RELEASE);
  for (;;) pause();  /* the worker's exit() ends the process */
}

static double now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Each round: ten chained kernels, then one that writes `round` to host-mapped memory, which
 * the host spins on without calling the driver. Once the work is learned it is deferred, the
 * flag kernel in the middle of a chunk: only a flush nobody asked for (the shim's flusher) ends
 * the spin. */
static int spin(CUstream on)
{
  struct setup k = setup();
  CUstream s = on ? on : k.s;
  volatile int *flag;
  CUdeviceptr dflag;
  CK(cuMemHostAlloc((void **)&flag, sizeof *flag, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  CK(cuMemHostGetDevicePointer(&dflag, (void *)flag, 0));
  *flag = 0;
  enum { ROUNDS = 16 };
  for (int round = 1; round <= ROUNDS; round++) {
    for (int i = 0; i < 10; i++) {
      /* a boundary mid-round: the flag kernel is mid-chunk, never the end of one */
      if (i == 5) CK(cuStreamSynchronize(s));
      chain(&k, s, k.acc, (unsigned long long)(round * 10 + i));
    }
    void *p[] = { &dflag, &round };
    CK(cuLaunchKernel(k.flag, 1, 1, 1, 1, 1, 1, 0, s, p, NULL));
    for (double start = now_s(); __atomic_load_n(flag, __ATOMIC_ACQUIRE) != round;)
      if (now_s() - start > 5.0) { printf("spin timeout in round %d\n", round); return 3; }
  }
  printf("checksum %016llx\nlaunches %d\n", prog_mix(14695981039346656037ULL, read_acc(s, k.acc)), ROUNDS * 11);
  return 0;
}

/* Six threads one after another (a finished thread's pthread_t is usually reused), each on its
 * own per-thread default stream: eight rounds of chained kernels, the last cut short, so the
 * thread ends with work a deferring shim still holds. Then 200 ms without driver calls. */
struct churn { const struct setup *k; CUcontext ctx; CUdeviceptr acc; int id; };

static void *churn_worker(void *arg)
{
  const struct churn *c = arg;
  CK(cuCtxSetCurrent(c->ctx));
  for (int round = 0; round < 8; round++) {
    if (round) CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    for (int i = 0; i < (round == 7 ? 3 : 5); i++)
      chain(c->k, CU_STREAM_PER_THREAD, c->acc, (unsigned long long)(c->id * 100 + round * 10 + i));
  }
  return NULL;
}

static int ptds_threads(CUcontext ctx)
{
  struct setup k = setup();
  enum { THREADS = 6 };
  struct churn c[THREADS];
  for (int t = 0; t < THREADS; t++) {
    c[t] = (struct churn){ &k, ctx, 0, t };
    CK(cuMemAlloc(&c[t].acc, 8));
    CK(cuMemsetD8(c[t].acc, 0, 8));
    pthread_t tid;
    if (pthread_create(&tid, NULL, churn_worker, &c[t]) != 0 || pthread_join(tid, NULL) != 0) return 1;
  }
  CK(cuCtxSynchronize());
  struct timespec pause = { 0, 200 * 1000000L };  /* time for a shim to tidy up after them */
  nanosleep(&pause, NULL);
  unsigned long long h = 14695981039346656037ULL, v;
  for (int t = 0; t < THREADS; t++) {
    CK(cuMemcpyDtoH(&v, c[t].acc, sizeof v));
    h = prog_mix(h, v);
  }
  printf("checksum %016llx\nlaunches %d\n", h, THREADS * 38);
  return 0;
}

static int capture(void)
{
  struct setup k = setup();
  enum { N = 256 };
  int n = N;
  unsigned long long step = 7;
  CUdeviceptr buf, copy, scratch;
  CK(cuMemAlloc(&buf, N * sizeof(float)));
  CK(cuMemAlloc(&copy, N * sizeof(float)));
  CK(cuMemAlloc(&scratch, N * sizeof(float)));
  CK(cuMemsetD32(buf, 0, N));
  CK(cuStreamBeginCapture(k.s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (int j = 0; j < 5; j++) chain(&k, k.s, k.acc, (unsigned long long)(100 + j));
  void *mix_p[] = { &buf, &n, &step };
  CK(cuLaunchKernel(k.mix, 1, 1, 1, 256, 1, 1, 0, k.s, mix_p, NULL));
  step = 1000;  /* the graph keeps the value at capture time */
  CK(cuMemsetD32Async(scratch, 3, N, k.s));
  CK(cuMemcpyDtoDAsync(copy, buf, N * sizeof(float), k.s));
  CUgraph g;
  CUgraphExec exec;
  CK(cuStreamEndCapture(k.s, &g));
  CK(cuGraphInstantiate(&exec, g, 0));
  for (int i = 0; i < 10; i++) CK(cuGraphLaunch(exec, k.s));
  unsigned long long h = prog_mix(14695981039346656037ULL, read_acc(k.s, k.acc));
  h = prog_mix_device(h, copy, N * sizeof(float));
  h = prog_mix_device(h, scratch, N * sizeof(float));
  CK(cuGraphExecDestroy(exec));
  CK(cuGraphDestroy(g));
  printf("checksum %016llx\nlaunches 60\n", h);
  return 0;
}

/* The program captures its own graph on its per-thread default stream, launching through the
 * _ptsz entry point with stream 0 (as `nvcc --default-stream per-thread` code does), after the
 * same launches ran eagerly there often enough to be learned. */
typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void **, void **);

static void ptsz_round(const struct setup *k, launch_fn launch, unsigned long long tag)
{
  for (int i = 0; i < 4; i++) {
    unsigned long long t = tag + (unsigned long long)i;
    void *p[] = { (void *)&k->acc, &t };
    CK(launch(k->chain, 1, 1, 1, 1, 1, 1, 0, NULL, p, NULL));
  }
}

static int capture_ptds(void)
{
  struct setup k = setup();
  launch_fn launch;
  CUdriverProcAddressQueryResult st;
  CK(cuGetProcAddress("cuLaunchKernel", (void **)&launch, CUDA_VERSION,
                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  if (st != CU_GET_PROC_ADDRESS_SUCCESS) { fprintf(stderr, "no cuLaunchKernel_ptsz\n"); return 1; }
  for (int r = 0; r < 8; r++) {
    ptsz_round(&k, launch, (unsigned long long)r * 10);
    CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  }
  CUgraph g;
  CUgraphExec exec;
  CK(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ptsz_round(&k, launch, 1000);
  CK(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g));
  CK(cuGraphInstantiate(&exec, g, 0));
  for (int i = 0; i < 3; i++) CK(cuGraphLaunch(exec, CU_STREAM_PER_THREAD));
  unsigned long long h = prog_mix(14695981039346656037ULL, read_acc(CU_STREAM_PER_THREAD, k.acc));
  CK(cuGraphExecDestroy(exec));
  CK(cuGraphDestroy(g));
  printf("checksum %016llx\nlaunches 36\n", h);
  return 0;
}

static int idle(void)
{
  struct setup k = setup();
  unsigned long long h = 14695981039346656037ULL;
  for (int round = 0; round < 10; round++) {
    for (int i = 0; i < 8; i++) chain(&k, k.s, k.acc, (unsigned long long)(round * 8 + i));
    h = prog_mix(h, read_acc(k.s, k.acc));
  }
  struct timespec t = { 0, 500 * 1000000L };
  nanosleep(&t, NULL);
  printf("checksum %016llx\nlaunches 80\n", h);
  return 0;
}

static atomic_int starting; /* 0 before the first wrapped call, 1 in it, 2 after */

static void *starter(void *ctx)
{
  CK(cuCtxSetCurrent(ctx));
  atomic_store(&starting, 1);
  CK(cuCtxSynchronize());
  atomic_store(&starting, 2);
  return NULL;
}

/* The child's exit status, or -1 when it has not ended within 10 s (it is killed then). */
static int child_status(pid_t pid)
{
  for (int i = 0; i < 1000; i++) {
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    struct timespec t = { 0, 10 * 1000000L };
    nanosleep(&t, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

static int fork_start(CUcontext ctx)
{
  pthread_t t;
  if (pthread_create(&t, NULL, starter, ctx) != 0) { fprintf(stderr, "pthread_create\n"); return 1; }
  while (atomic_load(&starting) == 0) sched_yield();
  int forks = 0, during = 0;
  for (bool last = false; !last; forks++) {
    int before = atomic_load(&starting);
    last = before == 2;
    /* The last child is forked after the first wrapped call: its thread is joined first, or
     * the child would hold a finished thread it cannot join (TSan: a leak at the child's exit). */
    if (last) pthread_join(t, NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) _exit(cuCtxSynchronize() == CUDA_SUCCESS ? 0 : 2);
    during += before == 1 && atomic_load(&starting) == 1;
    int st = child_status(pid);
    if (st != 0) {
      fprintf(stderr, "fork-start: child %d (forked %s the first wrapped call) %s\n", forks,
             before == 0 ? "before" : before == 1 ? "during" : "after",
             st < 0 ? "did not end within 10 s" : "failed");
      return 1;
    }
    struct timespec nap = { 0, 20 * 1000000L };
    nanosleep(&nap, NULL);
  }
  struct setup k = setup();
  for (int i = 0; i < 20; i++) chain(&k, k.s, k.acc, (unsigned long long)i);
  printf("forked %d during %d\nchecksum %016llx\nlaunches 20\n", forks, during,
         prog_mix(14695981039346656037ULL, read_acc(k.s, k.acc)));
  return 0;
}

int main(int argc, char **argv)
{
  const char *mode = prog_opt(argc, argv, "--mode");
  CUcontext ctx = prog_init();
  if (!mode) mode = "";
  if (strcmp(mode, "exit-no-cleanup") == 0) return exit_no_cleanup();
  if (strcmp(mode, "ctx-destroy") == 0) return ctx_destroy();
  if (strcmp(mode, "thread-exit") == 0) return thread_exit(ctx);
  if (strcmp(mode, "exit-order") == 0) return exit_order(ctx);
  if (strcmp(mode, "spin") == 0) return spin(NULL);
  if (strcmp(mode, "spin-ptds") == 0) return spin(CU_STREAM_PER_THREAD);
  if (strcmp(mode, "ptds-threads") == 0) return ptds_threads(ctx);
  if (strcmp(mode, "capture") == 0) return capture();
  if (strcmp(mode, "capture-ptds") == 0) return capture_ptds();
  if (strcmp(mode, "managed") == 0) return managed();
  if (strcmp(mode, "fork-start") == 0) return fork_start(ctx);
  if (strcmp(mode, "idle") == 0) return idle();
  if (strcmp(mode, "padding") == 0) return padding();
  fprintf(stderr, "usage: lifecycle --mode exit-no-cleanup|ctx-destroy|thread-exit|exit-order|spin|spin-ptds|ptds-threads|capture|capture-ptds|managed|idle|fork-start|padding\n");
  return 2;
}
