/* conf_fork: fork() with half a step in flight, as a data-loader worker forked mid-training. The
 * child computes a host-only value, prints `child <hex>` and exit(0)s, running atexit handlers;
 * the parent waits, finishes the step, runs 30 more and prints its checksum. A shim that submits
 * the parent's deferred work or writes its report from the child, or loses that work in the
 * parent, changes the driver calls (FAKECUDA_LOG: the child must make none between the two
 * cuCtxGetDevice markers), the report or the result. usage: conf_fork */
#include "prog.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = 1024, BEFORE = 10, AFTER = 30 };

struct k { CUfunction chain, mix, scale, axpy; CUstream s; CUdeviceptr x, y, acc; };

/* Half `part` (0 or 1) of step `it`: 6 launches. */
static void half(const struct k *k, int it, int part)
{
  unsigned long long st = (unsigned long long)it * 2 + (unsigned long long)part,
                     tag = (unsigned long long)it << 4 | (unsigned long long)part << 3;
  float f = part ? 0.25f : 0.5f;
  int n = N;
  void *mix_p[] = { (void *)&k->x, &n, &st }, *scale_p[] = { (void *)&k->x, &f, &n },
       *axpy_p[] = { (void *)&k->y, (void *)&k->x, &f, &n }, *chain_p[] = { (void *)&k->acc, &tag };
  prog_launch(k->mix, N, k->s, mix_p);
  prog_launch(k->scale, N, k->s, scale_p);
  for (int i = 0; i < 3; i++, tag++) prog_launch(k->chain, 0, k->s, chain_p);
  prog_launch(k->axpy, N, k->s, axpy_p);
}

static unsigned long long sync_read(const struct k *k, unsigned long long h)
{
  unsigned long long a;
  CK(cuStreamSynchronize(k->s));
  CK(cuMemcpyDtoH(&a, k->acc, sizeof a));
  return prog_mix(h, a);
}

int main(void)
{
  prog_init();
  CUmodule mod = prog_module();
  struct k k = { .chain = prog_fn(mod, "cg_chain"), .mix = prog_fn(mod, "cg_step_mix"),
                 .scale = prog_fn(mod, "cg_scale_f32"), .axpy = prog_fn(mod, "cg_axpy_f32") };
  CK(cuStreamCreate(&k.s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&k.x, N * sizeof(float)));
  CK(cuMemAlloc(&k.y, N * sizeof(float)));
  CK(cuMemAlloc(&k.acc, 8));
  CK(cuMemsetD32(k.x, 0, N));
  CK(cuMemsetD32(k.y, 0, N));
  CK(cuMemsetD8(k.acc, 0, 8));

  unsigned long long h = 14695981039346656037ULL;
  for (int it = 0; it < BEFORE; it++) {
    half(&k, it, 0);
    half(&k, it, 1);
    h = sync_read(&k, h);
  }
  half(&k, BEFORE, 0); /* in flight (deferred under a shim) across the fork */

  CUdevice dev;
  CK(cuCtxGetDevice(&dev)); /* marker: no driver call may follow until the parent's next one */
  fflush(stdout);           /* or the child's exit would print the parent's buffer again */
  pid_t pid = fork();
  if (pid < 0) { perror("fork"); return 1; }
  if (pid == 0) {
    unsigned long long c = prog_mix(h, 0xc41dULL);
    for (unsigned long long i = 0; i < 1000; i++) c = prog_mix(c, i);
    printf("child %016llx\n", c);
    exit(0);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid) { perror("waitpid"); return 1; }
  CK(cuCtxGetDevice(&dev));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "child ended with wait status %#x\n", (unsigned)status);
    return 1;
  }

  half(&k, BEFORE, 1);
  h = sync_read(&k, h);
  for (int it = BEFORE + 1; it <= BEFORE + AFTER; it++) {
    half(&k, it, 0);
    half(&k, it, 1);
    h = sync_read(&k, h);
  }
  h = prog_mix_device(h, k.x, N * sizeof(float));
  h = prog_mix_device(h, k.y, N * sizeof(float));
  printf("checksum %016llx\n", h);
  return 0;
}
