/* Finding the library and bundled programs, and running child commands for the subcommands. */
#define _GNU_SOURCE
#include "cugraft.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char *cg_tool_find(const char *rel, const char *installed)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *slash = strrchr(exe, '/');
		if (slash != NULL) {
			*slash = '\0';
			char *path;
			if (asprintf(&path, "%s/%s", exe, rel) > 0) {
				char *real = realpath(path, NULL);   /* LD_PRELOAD reads better without ".." */
				free(path);
				if (real != NULL)
					return real;
			}
		}
	}
	return installed != NULL && installed[0] != '\0' && access(installed, F_OK) == 0 ?
	       strdup(installed) : NULL;
}

char *cg_tool_library(void)
{
	return cg_tool_find("../shim/libcugraft.so", CG_INSTALLED_LIB);
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
