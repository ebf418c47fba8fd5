/* The `cugraft` command: dispatches to one subcommand per file (cmd-run.c, cmd-report.c,
 * cmd-profile.c, cmd-demo.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cugraft.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *what;
} cg_cmds[] = {
	{ "run", cg_cmd_run, "run a program with cugraft preloaded" },
	{ "report", cg_cmd_report, "render one or more report files (ranks merged)" },
	{ "profile", cg_cmd_profile, "find a program's step and what graphs could gain at most (nothing graphed)" },
	{ "demo", cg_cmd_demo, "run the bundled workload eagerly and under cugraft, compare" },
};

static int cg_usage(FILE *out, int status)
{
	fprintf(out, "usage: cugraft COMMAND [ARGS]\n\n");
	for (size_t i = 0; i < sizeof cg_cmds / sizeof cg_cmds[0]; i++)
		fprintf(out, "  %-8s %s\n", cg_cmds[i].name, cg_cmds[i].what);
	/* From a build tree the man page is not installed yet: name the one built next to the
	 * command. */
	char *page = cg_tool_build_man_page();
	if (page != NULL)
		fprintf(out, "\n`cugraft COMMAND --help` for each; `man -l %s`.\n", page);
	else
		fprintf(out, "\n`cugraft COMMAND --help` for each; `man cugraft`.\n");
	free(page);
	return status;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return cg_usage(stderr, 2);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0)
		return cg_usage(stdout, 0);
	for (size_t i = 0; i < sizeof cg_cmds / sizeof cg_cmds[0]; i++)
		if (strcmp(argv[1], cg_cmds[i].name) == 0)
			return cg_cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "cugraft: unknown command '%s'\n", argv[1]);
	return cg_usage(stderr, 2);
}
