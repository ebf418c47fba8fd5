/* Start-up checks: settings known to break CUDA graphs or to conflict with cugraft, found once
 * when the shim starts. Each is said on stderr and listed in the report's header. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "checks.h"
#include "shim/base/environ.h"
#include "shim/base/json.h"
#include "shim/base/log.h"
#include "shim/base/options.h"
#include "shim/base/report.h"

#define MAX_NOTES 4
static const char *notes[MAX_NOTES];
static int nnotes;

static void note(const char *text)
{
	if (nnotes < MAX_NOTES)
		notes[nnotes++] = text;
	cg_log(CG_LOG_WARN, "%s", text);
}

bool cg_check_launch_blocking(void)
{
	/* CUDA reads the variable as a number: any value but 0 makes every launch synchronous. */
	const char *v = getenv("CUDA_LAUNCH_BLOCKING");
	if (!v || !*v || strtol(v, NULL, 10) == 0)
		return false;
	note("CUDA_LAUNCH_BLOCKING is set: every launch completes before it returns, so nothing is "
	     "deferred (cugraft only records, as with CUGRAFT_RECORD_ONLY=1)");
	return true;
}

void cg_startup_checks(void)
{
	/* PyTorch's expandable segments remap memory that NCCL registered for graphs: NCCL's own
	 * advice is NCCL_GRAPH_REGISTER=0 with them. A value the user set is left alone. */
	const char *alloc = getenv("PYTORCH_CUDA_ALLOC_CONF");
	const char *seg = alloc ? strstr(alloc, "expandable_segments:") : NULL;
	if (seg && strncasecmp(seg + strlen("expandable_segments:"), "true", 4) == 0 &&
	    !getenv("NCCL_GRAPH_REGISTER")) {
		cg_environ_default("NCCL_GRAPH_REGISTER", "0");  /* not setenv: environ.c says why */
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
