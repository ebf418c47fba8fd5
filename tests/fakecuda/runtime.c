/* Accounting shared by every entry point of the fake driver: call counters, the FAKECUDA_LOG
 * call log, FAKECUDA_FAIL fault injection and the FAKECUDA_STATS counter file; plus the
 * entry points that only report about the driver itself (cuInit, versions, error strings). */
#include "fake.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cg_counters cg_count;
pthread_mutex_t cg_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const api_name[CG_API_COUNT] = {
#define CG_API(sym, base, ver, ptsz) #sym,
#include "api.def"
#undef CG_API
};
static atomic_ullong api_calls[CG_API_COUNT];

/* FAKECUDA_FAIL rules: the n-th call of api fails (every call from the n-th when `from`);
 * `capture` rules count only the calls that add a node to a capturing stream, so a test can fail
 * a graph build's launches without failing the program's own launches of the same entry point. */
struct fail_rule { enum cg_api api; unsigned long long n; bool from, capture; CUresult code; };
static struct fail_rule fail_rules[32];
static unsigned fail_nrules;
static atomic_ullong capture_calls[CG_API_COUNT];
static _Thread_local enum cg_api entered;  /* the entry point this thread is in */
static int log_fd = -1;
static atomic_bool initialized;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void parse_fail_spec(const char *spec)
{
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *colon = strchr(item, ':');
    if (!colon || fail_nrules == sizeof fail_rules / sizeof fail_rules[0]) goto bad;
    *colon = '\0';
    struct fail_rule r = { .code = CUDA_ERROR_OUT_OF_MEMORY };
    char *at = strchr(item, '@');
    if (at) {
      if (strcmp(at, "@capture") != 0) goto bad;
      *at = '\0';
      r.capture = true;
    }
    unsigned i = 0;
    while (i < CG_API_COUNT && strcmp(api_name[i], item) != 0) i++;
    if (i == CG_API_COUNT) goto bad;
    r.api = (enum cg_api)i;
    char *end;
    r.n = strtoull(colon + 1, &end, 10);
    if (*end == '+') { r.from = true; end++; }
    if (*end == '=') r.code = (CUresult)strtol(end + 1, &end, 10);
    if (*end != '\0' || r.n == 0) goto bad;
    fail_rules[fail_nrules++] = r;
    continue;
bad:
    fprintf(stderr, "fakecuda: ignoring bad FAKECUDA_FAIL item '%s'\n", item);
  }
}

static void read_env(void)
{
  const char *log = getenv("FAKECUDA_LOG");
  if (log && *log) log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const char *fail = getenv("FAKECUDA_FAIL");
  if (fail && *fail) parse_fail_spec(fail);
}

/* One write per line, so lines of concurrent threads never interleave. */
static void log_line(const char *a, const char *b)
{
  char line[160];
  int n = snprintf(line, sizeof line, "%s%s\n", a, b);
  if (n > 0 && write(log_fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
    return;  /* a test log that cannot be written is not the program's error */
}

static CUresult injected(enum cg_api id, unsigned long long nth, bool capture)
{
  for (unsigned i = 0; i < fail_nrules; i++) {
    const struct fail_rule *r = &fail_rules[i];
    if (r->api == id && r->capture == capture && (nth == r->n || (r->from && nth > r->n))) {
      atomic_fetch_add_explicit(&cg_count.faults_injected, 1, memory_order_relaxed);
      return r->code;
    }
  }
  return CUDA_SUCCESS;
}

CUresult cg_enter(enum cg_api id)
{
  pthread_once(&env_once, read_env);
  unsigned long long nth = atomic_fetch_add_explicit(&api_calls[id], 1, memory_order_relaxed) + 1;
  if (log_fd >= 0) log_line(api_name[id], "");
  entered = id;
  return injected(id, nth, false);
}

CUresult cg_enter_capture(void)
{
  unsigned long long nth =
    atomic_fetch_add_explicit(&capture_calls[entered], 1, memory_order_relaxed) + 1;
  return injected(entered, nth, true);
}

/* "run NAME (gx,gy,gz)x(bx,by,bz)+SHMEM": the shape is part of what ran. */
void cg_log_run(const char *kernel_name, const struct cg_shape *shape)
{
  if (log_fd < 0) return;
  char what[128];
  snprintf(what, sizeof what, "%s (%u,%u,%u)x(%u,%u,%u)+%u", kernel_name, shape->grid[0],
           shape->grid[1], shape->grid[2], shape->block[0], shape->block[1], shape->block[2],
           shape->shmem);
  log_line("run ", what);
}

struct stat_line { char text[96]; };

static int cmp_line(const void *a, const void *b)
{
  return strcmp(((const struct stat_line *)a)->text, ((const struct stat_line *)b)->text);
}

void fakecuda_write_stats(void)
{
  const char *path = getenv("FAKECUDA_STATS");
  if (!path || !*path) return;
  static struct stat_line lines[2 * CG_API_COUNT + 8];
  static pthread_mutex_t writing = PTHREAD_MUTEX_INITIALIZER;  /* exit() may race a test's call */
  pthread_mutex_lock(&writing);
  unsigned n = 0;
  const struct { const char *name; atomic_ullong *v; } fixed[] = {
    { "kernels_run", &cg_count.kernels_run }, { "launch_eager", &cg_count.launch_eager },
    { "graph_launches", &cg_count.graph_launches }, { "graph_nodes_run", &cg_count.graph_nodes_run },
    { "captured_nodes", &cg_count.captured_nodes }, { "memops_run", &cg_count.memops_run },
    { "faults_injected", &cg_count.faults_injected }, { "query_errors", &cg_count.query_errors },
    { "launch_shapes", &cg_count.launch_shapes },
  };
  for (unsigned i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
    snprintf(lines[n++].text, sizeof lines[0].text, "%s %llu\n", fixed[i].name,
             (unsigned long long)atomic_load(fixed[i].v));
  for (unsigned i = 0; i < CG_API_COUNT; i++) {
    unsigned long long c = atomic_load(&api_calls[i]);
    if (c) snprintf(lines[n++].text, sizeof lines[0].text, "api.%s %llu\n", api_name[i], c);
    c = atomic_load(&capture_calls[i]);
    if (c) snprintf(lines[n++].text, sizeof lines[0].text, "capture.%s %llu\n", api_name[i], c);
  }
  qsort(lines, n, sizeof lines[0], cmp_line);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    for (unsigned i = 0; i < n; i++)
      if (write(fd, lines[i].text, strlen(lines[i].text)) < 0) break;
    close(fd);
  } else {
    fprintf(stderr, "fakecuda: cannot write FAKECUDA_STATS=%s\n", path);
  }
  pthread_mutex_unlock(&writing);
}

__attribute__((destructor)) static void write_stats_at_exit(void) { fakecuda_write_stats(); }

bool cg_initialized(void) { return atomic_load(&initialized); }

CUresult CUDAAPI cuInit(unsigned int Flags)
{
  CG_ENTER(cuInit);
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  atomic_store(&initialized, true);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
  CG_ENTER(cuDriverGetVersion);
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = 13000;
  return CUDA_SUCCESS;
}

static const struct { CUresult code; const char *name, *text; } errors[] = {
#define E(code, text) { code, #code, text }
  E(CUDA_SUCCESS, "no error"),
  E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
  E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
  E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
  E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
  E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
  E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
  E(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
  E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
  E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
  E(CUDA_ERROR_NOT_READY, "device not ready"),
  E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
  E(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing"),
  E(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture"),
  E(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
  E(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"),
  E(CUDA_ERROR_UNKNOWN, "unknown error"),
#undef E
};

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
  CG_ENTER(cuGetErrorName);
  for (unsigned i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == error) { *pStr = errors[i].name; return CUDA_SUCCESS; }
  *pStr = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
  CG_ENTER(cuGetErrorString);
  for (unsigned i = 0; i < sizeof errors / sizeof errors[0]; i++)
    if (errors[i].code == error) { *pStr = errors[i].text; return CUDA_SUCCESS; }
  *pStr = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

/* The runtime's private tables do not exist here; libcudart copes with the refusal. */
CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
  CG_ENTER(cuGetExportTable);
  return CUDA_ERROR_NOT_SUPPORTED;
}
