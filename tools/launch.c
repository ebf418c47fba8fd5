/* Finding the library and bundled programs, and running child commands for the subcommands. */
#define _GNU_SOURCE
#include "cugraft.h"
#include "shim/base/options.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* <dir of this executable>/<rel>, resolved, when it exists; else NULL. */
static char *cg_tool_beside(const char *rel)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return NULL;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash == NULL)
		return NULL;
	*slash = '\0';
	char *path;
	if (asprintf(&path, "%s/%s", exe, rel) < 0)
		return NULL;
	char *real = realpath(path, NULL);   /* LD_PRELOAD reads better without ".." */
	free(path);
	return real;
}

/* The places a file is looked for, in order: a variable naming it (only that place when set),
 * then beside the command as in the build tree, as installed, and the configured prefix. */
struct cg_tool_places {
	const char *what;      /* for the error */
	const char *variable;  /* NULL: none */
	const char *build;     /* relative to the command's folder, in a build tree */
	const char *relative;  /* relative to the command's folder, as installed (empty: none) */
	const char *installed; /* absolute, the configured prefix (empty: none) */
};

size_t cg_file_head(const char *path, void *buf, size_t n)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		return 0;
	size_t got = fread(buf, 1, n, f);
	fclose(f);
	return got;
}

/* Whether `path` starts as an ELF object does. */
static bool cg_is_elf(const char *path)
{
	unsigned char magic[4];
	return cg_file_head(path, magic, sizeof magic) == sizeof magic &&
	       memcmp(magic, "\177ELF", 4) == 0;
}

static char *cg_tool_look(const struct cg_tool_places *p, bool quiet)
{
	const char *set = p->variable ? getenv(p->variable) : NULL;
	if (set != NULL && *set != '\0') {
		if (access(set, F_OK) != 0) {
			if (!quiet)
				fprintf(stderr, "cugraft: %s not found: %s=%s does not exist\n", p->what,
				        p->variable, set);
			return NULL;
		}
		if (!cg_is_elf(set)) {   /* ld.so would skip it, and the job run without it */
			if (!quiet)
				fprintf(stderr, "cugraft: %s=%s is no shared library (no ELF header)\n",
				        p->variable, set);
			return NULL;
		}
		return strdup(set);
	}
	const char *rel[] = { p->build, p->relative };
	for (size_t i = 0; i < 2; i++) {
		char *found = rel[i][0] != '\0' ? cg_tool_beside(rel[i]) : NULL;
		if (found != NULL)
			return found;
	}
	if (p->installed[0] != '\0' && access(p->installed, F_OK) == 0)
		return strdup(p->installed);
	if (quiet)
		return NULL;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash != NULL)
		*slash = '\0';
	fprintf(stderr, "cugraft: %s not found; looked at\n", p->what);
	for (size_t i = 0; i < 2; i++)
		if (rel[i][0] != '\0')
			fprintf(stderr, "  %s/%s\n", exe, rel[i]);
	if (p->installed[0] != '\0')
		fprintf(stderr, "  %s\n", p->installed);
	if (p->variable)
		fprintf(stderr, "(%s names it elsewhere)\n", p->variable);
	return NULL;
}

char *cg_tool_library(void)
{
	const struct cg_tool_places lib = {
		"libcugraft.so", cg_opt_info(CG_OPT_LIBRARY)->name, "../shim/libcugraft.so",
		CG_RELATIVE_LIB, CG_INSTALLED_LIB,
	};
	return cg_tool_look(&lib, false);
}

char *cg_tool_demo_work(void)
{
	static const struct cg_tool_places work = {
		"the demo workload (cugraft-demo-work)", NULL, "../bench/workloads/cugraft-demo-work",
		CG_RELATIVE_DEMO, CG_INSTALLED_DEMO,
	};
	return cg_tool_look(&work, false);
}

char *cg_tool_fake_driver(void)
{
	static const struct cg_tool_places fake = {
		"the CPU fake driver (libcuda.so.1)", NULL, "../tests/fakecuda/libcuda.so.1",
		CG_RELATIVE_FAKE, CG_INSTALLED_FAKE,
	};
	return cg_tool_look(&fake, false);
}

char *cg_tool_build_man_page(void)
{
	return cg_tool_beside("cugraft.1");
}

char *cg_preload_value(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	char *v;
	if (asprintf(&v, "%s%s%s", lib, old && *old ? ":" : "", old && *old ? old : "") < 0)
		return NULL;
	return v;
}

int cg_spawn(char *const argv[], const struct cg_env *env, size_t n_env, char **out)
{
	int fds[2] = { -1, -1 };
	if (out != NULL && pipe(fds) != 0) {
		perror("cugraft: pipe");
		return 1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("cugraft: fork");
		return 1;
	}
	if (pid == 0) {
		for (size_t i = 0; i < n_env; i++) {
			if (env[i].value)
				setenv(env[i].name, env[i].value, 1);
			else
				unsetenv(env[i].name);
		}
		if (out != NULL) {
			dup2(fds[1], STDOUT_FILENO);
			close(fds[0]);
			close(fds[1]);
		}
		execvp(argv[0], argv);
		fprintf(stderr, "cugraft: %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	if (out != NULL) {
		close(fds[1]);
		size_t len = 0, cap = 4096;
		char *buf = malloc(cap);
		ssize_t n;
		while (buf != NULL && (n = read(fds[0], buf + len, cap - len - 1)) != 0) {
			if (n < 0) {
				if (errno == EINTR)
					continue;
				break;
			}
			len += (size_t)n;
			if (cap - len < 2)
				buf = realloc(buf, cap *= 2);
		}
		close(fds[0]);
		if (buf != NULL)
			buf[len] = '\0';
		*out = buf;
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			perror("cugraft: waitpid");
			return 1;
		}
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}
