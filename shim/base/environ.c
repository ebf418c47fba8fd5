/* getenv, exported: a setting the shim makes for the process (NCCL_GRAPH_REGISTER=0 beside
 * PyTorch's expandable segments, shim/start/checks.c) must reach the libraries that read it with
 * getenv, and setenv cannot do it safely: start-up runs when other threads may be reading the
 * environment, and glibc's setenv may free the array they walk. Every other answer is libc's:
 * getenv is a scan of `environ`, done here the same way. A base file: it calls nothing of the
 * shim, so the shim's own getenv calls (options, report) stay at the bottom of the house. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "environ.h"

extern char **environ;

#define MAX_DEFAULTS 4
static struct {
	const char *name, *value;
} defaults[MAX_DEFAULTS];
static atomic_int ndefaults;  /* published after the slot is written */

bool cg_environ_default(const char *name, const char *value)
{
	int n = atomic_load_explicit(&ndefaults, memory_order_relaxed);
	if (n >= MAX_DEFAULTS)
		return false;
	defaults[n].name = name;
	defaults[n].value = value;
	atomic_store_explicit(&ndefaults, n + 1, memory_order_release);
	return true;
}

__attribute__((visibility("default"))) char *getenv(const char *name);
__attribute__((visibility("default"))) char *getenv(const char *name)
{
	size_t len = strlen(name);
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
			return *e + len + 1;
	int n = atomic_load_explicit(&ndefaults, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (strcmp(name, defaults[i].name) == 0)
			return (char *)defaults[i].value;
	return NULL;
}
