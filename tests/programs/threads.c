/* threads: 8 threads, each with its own stream, run a cg_chain loop of 200 launches with a sync
 * every 10 and record an event after each launch, while another thread polls cuEventQuery on
 * those events (as a DDP watchdog or PyTorch's pinned-memory allocator does). Prints
 * `checksum <hex>` of every thread's chain and `launches <n>`.
 * --ptds: each thread launches on its per-thread default stream, records its event every 10
 * launches and syncs every 20; now and then it sleeps mid-chunk (6 ms: three times the shim's
 * default deferral bound, so that its flusher comes within the nap even on a loaded machine),
 * and thread 0 also launches on the legacy stream, which every other thread's stream is ordered
 * against. */
#include "prog.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum { THREADS = 8, ITERS = 200 };

static CUcontext ctx;
static CUfunction chain;
static CUevent events[THREADS];
static unsigned long long results[THREADS];
static atomic_int finished;
static bool ptds;

static void nap_ms(int ms)
{
  struct timespec t = { 0, ms * 1000000L };
  nanosleep(&t, NULL);
}

static void *worker(void *arg)
{
  int t = (int)(size_t)arg;
  CK(cuCtxSetCurrent(ctx));
  CUstream s = CU_STREAM_PER_THREAD;
  CUdeviceptr acc;
  if (!ptds) CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuMemAlloc(&acc, 8));
  CK(cuMemsetD8(acc, 0, 8));
  for (int i = 0; i < ITERS; i++) {
    unsigned long long tag = (unsigned long long)t << 16 | (unsigned long long)i;
    void *p[] = { &acc, &tag };
    CK(cuLaunchKernel(chain, 1, 1, 1, 1, 1, 1, 0, s, p, NULL));
    if (!ptds) {
      CK(cuEventRecord(events[t], s));
      if (i % 10 == 9) CK(cuStreamSynchronize(s));
      continue;
    }
    if (t == 0 && i % 16 == 7) CK(cuLaunchKernel(chain, 1, 1, 1, 1, 1, 1, 0, CU_STREAM_LEGACY, p, NULL));
    if (i % 25 == 12 + t % 3) nap_ms(6);
    if (i % 10 == 9) CK(cuEventRecord(events[t], s));
    if (i % 20 == 19) CK(cuStreamSynchronize(s));
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

int main(int argc, char **argv)
{
  ptds = argc > 1 && strcmp(argv[1], "--ptds") == 0;
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
  printf("checksum %016llx\nlaunches %d\n", h, THREADS * ITERS + (ptds ? (ITERS + 8) / 16 : 0));
  return 0;
}
