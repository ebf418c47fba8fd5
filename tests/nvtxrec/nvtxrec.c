/* An NVTX injection library for tests (NVTX_INJECTION64_PATH): records every domain, range and
 * mark it is given, one line each, to the file NVTXREC_OUT names ("init" when NVTX starts it):
 *   domain NAME | push TID DOMAIN MESSAGE | pop TID DOMAIN | mark TID DOMAIN MESSAGE
 *   start TID DOMAIN ID MESSAGE | end TID DOMAIN ID
 * DOMAIN is "-" for the default domain. Lines are written whole with O_APPEND. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nvtx3/nvToolsExt.h>

struct nvtxDomainRegistration_st { char name[64]; };

#define DOMAINS 32
static struct nvtxDomainRegistration_st domains[DOMAINS];
static int ndomains;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int out = -1;
static uint64_t next_id = 1;

static void put(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	if (out >= 0 && write(out, line, (size_t)n) != n)
		abort();
}

static long tid(void) { return (long)syscall(SYS_gettid); }
static const char *dname(nvtxDomainHandle_t d) { return d ? d->name : "-"; }
static const char *msg(const nvtxEventAttributes_t *a)
{
	return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii ? a->message.ascii : "?";
}

static nvtxDomainHandle_t domain_create(const char *name)
{
	pthread_mutex_lock(&lock);
	nvtxDomainHandle_t d = ndomains < DOMAINS ? &domains[ndomains++] : &domains[DOMAINS - 1];
	snprintf(d->name, sizeof d->name, "%s", name);
	put("domain %s", d->name);
	pthread_mutex_unlock(&lock);
	return d;
}
static void domain_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	put("mark %ld %s %s", tid(), dname(d), msg(a));
}
static int domain_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	put("push %ld %s %s", tid(), dname(d), msg(a));
	return 0;
}
static int domain_pop(nvtxDomainHandle_t d)
{
	put("pop %ld %s", tid(), dname(d));
	return 0;
}
static nvtxRangeId_t domain_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	uint64_t id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
	put("start %ld %s %llu %s", tid(), dname(d), (unsigned long long)id, msg(a));
	return id;
}
static void domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
	put("end %ld %s %llu", tid(), dname(d), (unsigned long long)id);
}
static void mark_ex(const nvtxEventAttributes_t *a) { domain_mark(NULL, a); }
static void mark_a(const char *m) { put("mark %ld - %s", tid(), m); }
static int push_ex(const nvtxEventAttributes_t *a) { return domain_push(NULL, a); }
static int push_a(const char *m) { put("push %ld - %s", tid(), m); return 0; }
static int pop(void) { return domain_pop(NULL); }

static void set(NvtxFunctionTable table, unsigned size, unsigned id, NvtxFunctionPointer f)
{
	if (id < size && table[id])
		*table[id] = f;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
	const char *path = getenv("NVTXREC_OUT");
	out = path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : STDERR_FILENO;
	put("init");
	const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
	NvtxFunctionTable t;
	unsigned size;
	if (!cb || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &size))
		return 0;
	set(t, size, NVTX_CBID_CORE2_DomainCreateA, (NvtxFunctionPointer)domain_create);
	set(t, size, NVTX_CBID_CORE2_DomainMarkEx, (NvtxFunctionPointer)domain_mark);
	set(t, size, NVTX_CBID_CORE2_DomainRangePushEx, (NvtxFunctionPointer)domain_push);
	set(t, size, NVTX_CBID_CORE2_DomainRangePop, (NvtxFunctionPointer)domain_pop);
	set(t, size, NVTX_CBID_CORE2_DomainRangeStartEx, (NvtxFunctionPointer)domain_start);
	set(t, size, NVTX_CBID_CORE2_DomainRangeEnd, (NvtxFunctionPointer)domain_end);
	if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &size))
		return 0;
	set(t, size, NVTX_CBID_CORE_MarkEx, (NvtxFunctionPointer)mark_ex);
	set(t, size, NVTX_CBID_CORE_MarkA, (NvtxFunctionPointer)mark_a);
	set(t, size, NVTX_CBID_CORE_RangePushEx, (NvtxFunctionPointer)push_ex);
	set(t, size, NVTX_CBID_CORE_RangePushA, (NvtxFunctionPointer)push_a);
	set(t, size, NVTX_CBID_CORE_RangePop, (NvtxFunctionPointer)pop);
	return 1;
}
