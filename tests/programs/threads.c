/* threads: 8 threads, each with its own stream, run a cg_chain loop of 200 launches with a sync
 * every 10 and record an event after each launch, while another thread polls cuEventQuery on
 * those events (as a DDP watchdog or PyTorch's pinned-memory allocator does). Prints
 * `checksum <hex>` of every thread's chain and `launches <n>`. */
#include "prog.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

enum { THREADS = 8, ITERS = 200 };

static CUcontext ctx;
static CUfunction chain;
static CUevent events[THREADS];
static unsigned long long results[THREADS];
static atomic_int finished;

static void *worker(void *arg)
{
  int t = (int)(size_t)arg;
  CK(cuCtxSetCurrent(ctx));
  CUstream s;
  CUdeviceptr acc;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemsetD8(acc, 0, 8));
  for (int i = 0; i < ITERS; i++) {
    unsigned long long tag = (unsigned long long)t << 16 | (unsigned long long)i;
    void *p[] = { &acc, &tag };
    CK(cuLaunchKernel(chain, 1, 1, 1, 1, 1, 1, 0, s, p, NULL));
    CK(cuEventRecord(events[t], s));
    if (i % 10 == 9) CK(cuStreamSynchronize(s));
  }
  CK(cuStreamSynchronize(s));
  CK(cuMemcpyDtoH(&results[t], acc, sizeof results[t]));
  atomic_fetch_add(&finished, 1);
  return NULL;
}

static void *poller(void *arg)
{
  CK(cuCtxSetCurrent(ctx));
  while (atomic_load(&finished) < THREADS)
    for (int t = 0; t < THREADS; t++) {
      CUresult r = cuEventQuery(events[t]);
      if (r != CUDA_ERROR_NOT_READY) CK(r);
    }
  return NULL;
}

int main(void)
{
  ctx = prog_init();
  chain = prog_fn(prog_module(), "cg_chain");
  for (int t = 0; t < THREADS; t++) CK(cuEventCreate(&events[t], CU_EVENT_DISABLE_TIMING));
  pthread_t tids[THREADS + 1];
  if (pthread_create(&tids[THREADS], NULL, poller, NULL) != 0) return 1;
  for (int t = 0; t < THREADS; t++)
    if (pthread_create(&tids[t], NULL, worker, (void *)(size_t)t) != 0) return 1;
  for (int t = 0; t <= THREADS; t++) pthread_join(tids[t], NULL);
  unsigned long long h = 14695981039346656037ULL;
  for (int t = 0; t < THREADS; t++) h = prog_mix(h, results[t]);
  printf("checksum %016llx\nlaunches %d\n", h, THREADS * ITERS);
  return 0;
}
