/* Start-up checks: settings known to break CUDA graphs or to conflict with cugraft, found once
 * when the shim starts. Each is said on stderr and listed in the report's header. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "checks.h"
#include "driver.h"
#include "json.h"
#include "log.h"
#include "options.h"
#include "report.h"

#define MAX_NOTES 4
static const char *notes[MAX_NOTES];
static int nnotes;

static void note(const char *text)
{
	if (nnotes < MAX_NOTES)
		notes[nnotes++] = text;
	cg_log(CG_LOG_WARN, "%s", text);
}

/* --- NCCL_GRAPH_REGISTER=0 without setenv ------------------------------------------------- */
/* Start-up runs when other threads may already read the environment, and setenv then races
 * with them (glibc may free the array they walk). So the process environment is left as it is
 * and getenv, which NCCL reads its settings with, is answered here: our setting shows only
 * where the variable is unset, and a child process decides for itself. */
extern char **environ;
static atomic_bool graph_register_off;
static char *(*_Atomic real_getenv)(const char *);

/* Until the constructor has found libc's getenv (other libraries' constructors may ask first). */
static char *scan_environ(const char *name)
{
	size_t n = strlen(name);
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

__attribute__((constructor)) static void find_getenv(void)
{
	atomic_store(&real_getenv, (char *(*)(const char *))cg_real_dlsym(RTLD_NEXT, "getenv"));
}

CG_EXPORT char *getenv(const char *name);
CG_EXPORT char *getenv(const char *name)
{
	char *(*real)(const char *) = atomic_load_explicit(&real_getenv, memory_order_acquire);
	char *v = real ? real(name) : scan_environ(name);
	if (!v && atomic_load_explicit(&graph_register_off, memory_order_acquire) &&
	    strcmp(name, "NCCL_GRAPH_REGISTER") == 0)
		return (char *)"0";
	return v;
}

void cg_startup_checks(void)
{
	/* PyTorch's expandable segments remap memory that NCCL registered for graphs: NCCL's own
	 * advice is NCCL_GRAPH_REGISTER=0 with them. A value the user set is left alone. */
	const char *alloc = getenv("PYTORCH_CUDA_ALLOC_CONF");
	const char *seg = alloc ? strstr(alloc, "expandable_segments:") : NULL;
	if (seg && strncasecmp(seg + strlen("expandable_segments:"), "true", 4) == 0 &&
	    !getenv("NCCL_GRAPH_REGISTER")) {
		atomic_store_explicit(&graph_register_off, true, memory_order_release);
		note("PYTORCH_CUDA_ALLOC_CONF has expandable_segments:True: set NCCL_GRAPH_REGISTER=0 "
		     "for this process (graph-registered NCCL buffers and remapped segments do not mix)");
	}
	/* Nsight Systems/Compute and compute-sanitizer inject a CUPTI client: only one may subscribe. */
	if (getenv("CUDA_INJECTION64_PATH") && cg_opt_bool(CG_OPT_AUDIT))
		note("a CUDA tool is injected (CUDA_INJECTION64_PATH): CUGRAFT_AUDIT may not get CUPTI; "
		     "cugraft carries on without it if so");
}

void cg_startup_checks_json(struct cg_json *j)
{
	cg_json_arr(j, "startup_checks");
	for (int i = 0; i < nnotes; i++)
		cg_json_arr_str(j, notes[i]);
	cg_json_arr_end(j);
}

void cg_note_once(int *once, const char *text)
{
	if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
		return;
	cg_log(CG_LOG_WARN, "%s", text);
	if (!cg_report_active())
		return;
	struct cg_json j;
	cg_json_begin(&j, "note");
	cg_json_str(&j, "text", text);
	if (cg_json_end(&j))
		cg_report_emit(&j);
}
