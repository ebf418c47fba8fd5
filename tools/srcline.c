/* file:line for a report frame, found when rendering (never in the job): the frame's
 * "PATH+0xOFFSET" goes to `addr2line`, run without a shell (the path comes from a file). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "srcline.h"

extern char **environ;

bool cg_srcline(const char *where, char *out, size_t size)
{
	const char *plus = where ? strrchr(where, '+') : NULL;
	if (!plus || plus == where || strncmp(plus + 1, "0x", 2) != 0 || size < 2)
		return false;
	char path[4096];
	size_t len = (size_t)(plus - where);
	if (len >= sizeof(path))
		return false;
	memcpy(path, where, len);
	path[len] = '\0';
	if (access(path, R_OK) != 0)
		return false;

	int fd[2];
	if (pipe(fd) != 0)
		return false;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addclose(&fa, fd[0]);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	char *argv[] = { "addr2line", "-e", path, (char *)plus + 1, NULL };
	pid_t pid;
	int rc = posix_spawnp(&pid, "addr2line", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fd[1]);
	if (rc != 0) {
		close(fd[0]);
		return false;  /* no addr2line here: frames stay as they are */
	}
	ssize_t n = read(fd[0], out, size - 1);
	close(fd[0]);
	waitpid(pid, NULL, 0);
	if (n <= 0)
		return false;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	char *disc = strstr(out, " (discriminator");
	if (disc)
		*disc = '\0';
	return out[0] && strncmp(out, "??", 2) != 0 && !strstr(out, ":?") && !strstr(out, ":0");
}
