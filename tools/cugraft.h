/* The `cugraft` command: one file per subcommand (cmd-*.c), and what they share for finding
 * the library and bundled programs and for running a child command (launch.c). */
#ifndef CG_TOOLS_CUGRAFT_H
#define CG_TOOLS_CUGRAFT_H

#include <stdbool.h>
#include <stddef.h>

int cg_cmd_run(int argc, char **argv);
int cg_cmd_report(int argc, char **argv);
int cg_cmd_profile(int argc, char **argv);
int cg_cmd_demo(int argc, char **argv);

/* The first bytes of file `path`, up to n, into buf; the count read (0: none, or no such file). */
size_t cg_file_head(const char *path, void *buf, size_t n);

/* What the command runs, found relative to its own executable (/proc/self/exe) so that a
 * build tree, a DESTDIR staging tree, a wheel's environment or an unpacked tarball work where
 * they are: beside it as in the build tree, then as installed (tools/meson.build: the install
 * folders relative to bindir), then at the configured prefix. NULL, with every place looked at
 * printed to stderr, when none exists. Returned strings are malloc'd. */
/* libcugraft.so; CUGRAFT_LIBRARY, when set, names it instead. */
char *cg_tool_library(void);
/* The demo workload (bench/workloads/demo_work.c). */
char *cg_tool_demo_work(void);
/* The CPU fake driver `cugraft demo` runs against where there is no GPU. */
char *cg_tool_fake_driver(void);
/* The man page built beside the command in a build tree (not installed yet), or NULL. */
char *cg_tool_build_man_page(void);

/* An environment change applied in the child: value NULL unsets. */
struct cg_env { const char *name, *value; };

/* Runs argv (PATH lookup) with the changes applied, waits, and returns its status as a shell
 * shows it (128+signal for a signal death, 127 not found, 126 not executable). With `out`
 * non-NULL its stdout is collected into a malloc'd string instead of passing through. */
int cg_spawn(char *const argv[], const struct cg_env *env, size_t n_env, char **out);

/* LD_PRELOAD with lib in front of what is already there. malloc'd. */
char *cg_preload_value(const char *lib);

#endif
