/* ncclloop: a data-parallel step around an NCCL all-reduce. Per iteration on a created stream:
 * 10 kernels computing a "gradient" g, ncclAllReduce(g -> r, sum, float), 3 kernels that read
 * r, one stream sync and a DtoH read. --group puts the all-reduce in a group with one more
 * kernel (g *= 2) before ncclGroupEnd: with one rank NCCL enqueues its copy at the call, so that
 * write must NOT be reduced (a shim that holds the earlier kernels back to the group end gets
 * this wrong; measured on the H200); with several ranks NCCL launches at the group end, so it
 * is. --dlsym calls ncclAllReduce through dlsym on a libnccl handle, as frameworks that load
 * NCCL themselves do. Prints `checksum <hex>` and `launches <n>` (this program's own).
 *
 * --ranks N runs N ranks as N processes, as a launcher would: the parent takes a unique id and
 * starts each rank as this program again (fork + exec, before any CUDA call; RANK=r in its
 * environment) with `--rank r --nccl-id HEX`, which is also how to start one rank by hand; rank r
 * runs on device r modulo the device count. Rank
 * r's gradient depends on r, so the checksum proves the reduction; every rank prints
 * `rank r checksum <hex>` and `rank r launches <n>` (all ranks' checksums are equal), the parent
 * `rank r exit <status>` per rank. The parent waits --timeout S seconds (default 60), then kills
 * what is left and exits 3; else it exits 0 when every rank did, 77 when all skipped, 1 if not.
 * --diverge R:I: at iteration I rank R all-reduces into another buffer (r2, which the next
 * kernels then read): every rank makes the same NCCL calls, but one rank's call differs from
 * its previous iterations' while the others' repeat. --check-environ: also prints `environ
 * unchanged` or `environ replaced` (the process environment's array, from main's start to its
 * end: setenv while other threads may read it is a race). */
#define _GNU_SOURCE
#include "prog.h"
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
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

static char prefix[32]; /* "rank r " with several ranks */

/* One write(2) per line, so that the lines of the ranks do not interleave. */
static void say(int fd, const char *fmt, ...)
{
  char line[512];
  int n = snprintf(line, sizeof(line), "%s", prefix);
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof(line)) n = (int)sizeof(line) - 1;
  if (write(fd, line, (size_t)n) < 0) exit(1);
}

#define NK(call) nccl_check((call), #call, __LINE__)
static void nccl_check(ncclResult_t r, const char *what, int line)
{
  if (r == ncclSuccess) return;
  say(2, "ncclloop.c:%d: %s failed: %s (%d)\n", line, what, ncclGetErrorString(r), (int)r);
  exit(1);
}

enum { N = 4096 };
static CUstream s;
static unsigned long long launches;

static void launch(CUfunction f, void **p)
{
  CK(cuLaunchKernel(f, (N + 255) / 256, 1, 1, 256, 1, 1, 0, s, p, NULL));
  launches++;
}

static double now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* The parent of --ranks N: starts the ranks, waits for them, never touches CUDA. */
static int run_ranks(int argc, char **argv, int nranks, double timeout)
{
  ncclUniqueId id;
  NK(ncclGetUniqueId(&id));
  char hex[2 * sizeof(id.internal) + 1], rank_arg[16];
  for (size_t i = 0; i < sizeof(id.internal); i++)
    sprintf(hex + 2 * i, "%02x", (unsigned char)id.internal[i]);
  char **args = calloc((size_t)argc + 5, sizeof(*args));
  pid_t *pid = calloc((size_t)nranks, sizeof(*pid));
  int *status = calloc((size_t)nranks, sizeof(*status));
  if (!args || !pid || !status) { fprintf(stderr, "ncclloop: out of memory\n"); return 1; }
  memcpy(args, argv, (size_t)argc * sizeof(*args));
  args[argc] = "--rank";
  args[argc + 1] = rank_arg;
  args[argc + 2] = "--nccl-id";
  args[argc + 3] = hex;
  for (int r = 0; r < nranks; r++) {
    snprintf(rank_arg, sizeof(rank_arg), "%d", r);
    if ((pid[r] = fork()) < 0) { perror("ncclloop: fork"); return 1; }
    if (pid[r] == 0) {
      setenv("RANK", rank_arg, 1);
      execv("/proc/self/exe", args);
      perror("ncclloop: exec");
      _exit(127);
    }
  }
  int left = nranks, worst = 0, skipped = 0;
  double deadline = now_s() + timeout;
  while (left > 0 && now_s() < deadline) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p <= 0) { nanosleep(&(struct timespec){ 0, 10000000 }, NULL); continue; }
    for (int r = 0; r < nranks; r++) {
      if (pid[r] != p) continue;
      status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      say(1, "rank %d exit %d\n", r, status[r]);
      skipped += status[r] == 77;
      if (status[r] != 0 && status[r] != 77) worst = 1;
      pid[r] = 0;
      left--;
    }
  }
  for (int r = 0; r < nranks; r++) {
    if (!pid[r]) continue;
    kill(pid[r], SIGKILL);
    waitpid(pid[r], NULL, 0);
    say(2, "ncclloop: rank %d did not finish within %g s: killed\n", r, timeout);
  }
  if (left > 0) return 3;
  return worst ? 1 : skipped == nranks ? 77 : skipped ? 1 : 0;
}

extern char **environ;

int main(int argc, char **argv)
{
  char **env0 = environ;
  const char *ranks_opt = prog_opt(argc, argv, "--ranks"), *rank_opt = prog_opt(argc, argv, "--rank"),
             *id_opt = prog_opt(argc, argv, "--nccl-id"), *div_opt = prog_opt(argc, argv, "--diverge"),
             *timeout_opt = prog_opt(argc, argv, "--timeout");
  int nranks = ranks_opt ? atoi(ranks_opt) : 0, rank = rank_opt ? atoi(rank_opt) : 0;
  if ((rank_opt && !ranks_opt) || (ranks_opt && (nranks < 1 || (rank_opt && (rank < 0 || rank >= nranks))))) {
    fprintf(stderr, "ncclloop: bad --ranks/--rank\n");
    return 2;
  }
  if (ranks_opt && !rank_opt) return run_ranks(argc, argv, nranks, timeout_opt ? atof(timeout_opt) : 60);
  if (rank_opt) snprintf(prefix, sizeof(prefix), "rank %d ", rank);
  int div_rank = -1, div_iter = -1;
  if (div_opt && sscanf(div_opt, "%d:%d", &div_rank, &div_iter) != 2) {
    fprintf(stderr, "ncclloop: --diverge wants RANK:ITER\n");
    return 2;
  }

  int iters = prog_iters(argc, argv, 40), group = prog_flag(argc, argv, "--group");
  prog_init_device(rank);
  CUmodule m = prog_module();
  CUfunction mix = prog_fn(m, "cg_step_mix"), axpy = prog_fn(m, "cg_axpy_f32"),
             scale = prog_fn(m, "cg_scale_f32"), chain = prog_fn(m, "cg_chain");
  __typeof__(&ncclAllReduce) allreduce = ncclAllReduce;
  if (prog_flag(argc, argv, "--dlsym")) {
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h || !(*(void **)&allreduce = dlsym(h, "ncclAllReduce"))) {
      fprintf(stderr, "ncclloop: no ncclAllReduce in libnccl.so.2\n");
      return 1;
    }
  }
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr g, r, r2, w, acc;
  CK(cuMemAlloc(&g, N * sizeof(float)));
  CK(cuMemAlloc(&r, N * sizeof(float)));
  CK(cuMemAlloc(&r2, N * sizeof(float)));
  CK(cuMemAlloc(&w, N * sizeof(float)));
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemsetD32(g, 0, N));
  CK(cuMemsetD32(w, 0x3f800000, N)); /* 1.0f */
  CK(cuMemsetD8(acc, 0, 8));
  ncclComm_t comm;
  int dev = 0, count = 0, want = rank_opt ? nranks : 1;
  if (rank_opt) {
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    for (size_t i = 0; id_opt && i < sizeof(id.internal) && sscanf(id_opt + 2 * i, "%2hhx", (unsigned char *)&id.internal[i]) == 1; i++)
      ;
    NK(ncclCommInitRank(&comm, nranks, id, rank));
  } else {
    NK(ncclCommInitAll(&comm, 1, &dev));
  }
  NK(ncclCommCount(comm, &count));
  if (count != want) { say(2, "ncclloop: %d ranks, want %d\n", count, want); return 1; }

  int n = N;
  float half = 0.5f, twice = 2.0f, decay = 0.999f, lr = -0.01f;
  unsigned long long h = 0;
  CUdeviceptr recv = r;
  for (int i = 0; i < iters; i++) {
    /* rank-dependent gradient: the all-reduced sum differs with the number of ranks */
    unsigned long long step = (unsigned long long)i | (unsigned long long)rank << 32,
                       tag1 = (unsigned long long)i << 8 | 1, tag2 = (unsigned long long)i << 8 | 2;
    float a[4] = { 0.25f, -0.125f, 0.0625f, 0.5f };
    recv = rank == div_rank && i == div_iter ? r2 : r;
    launch(mix, (void *[]){ &g, &n, &step });
    for (int k = 0; k < 4; k++) {
      launch(axpy, (void *[]){ &g, &w, &a[k], &n });
      launch(scale, (void *[]){ &g, &half, &n });
    }
    launch(chain, (void *[]){ &acc, &tag1 });
    if (group) {
      NK(ncclGroupStart());
      NK(allreduce((const void *)g, (void *)recv, N, ncclFloat, ncclSum, comm, s));
      launch(scale, (void *[]){ &g, &twice, &n });
      NK(ncclGroupEnd());
    } else {
      NK(allreduce((const void *)g, (void *)recv, N, ncclFloat, ncclSum, comm, s));
    }
    launch(axpy, (void *[]){ &w, &recv, &lr, &n });
    launch(chain, (void *[]){ &acc, &tag2 });
    launch(scale, (void *[]){ &w, &decay, &n });
    CK(cuStreamSynchronize(s));
    h = prog_mix_device(h, w, 8 * sizeof(float));
  }
  h = prog_mix_device(h, recv, N * sizeof(float));
  h = prog_mix_device(h, w, N * sizeof(float));
  h = prog_mix_device(h, acc, 8);
  NK(ncclCommDestroy(comm));
  CK(cuStreamDestroy(s));
  say(1, "checksum %016llx\n", h);
  say(1, "launches %llu\n", launches);
  if (prog_flag(argc, argv, "--check-environ"))
    say(1, "environ %s\n", environ == env0 ? "unchanged" : "replaced");
  return 0;
}
