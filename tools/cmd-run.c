/* `cugraft run [flags] -- CMD ARGS...`: sets CUGRAFT_* from the flags, preloads the library and
 * execs CMD in place, so CMD keeps cugraft's pid (the report's %p), receives signals directly,
 * and its exit status or signal death is exactly what the caller sees (a shell shows 128+sig). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cugraft.h"
#include "shim/base/options.h"

/* Flags that take a value, each naming its option; values are checked with the shim's parser
 * so that a typo fails here rather than as a warning inside the job. */
static const struct { const char *flag; enum cg_opt opt; } cg_run_valued[] = {
	{ "--report", CG_OPT_REPORT }, { "--warmup", CG_OPT_WARMUP }, { "--chunk", CG_OPT_CHUNK },
	{ "--scope", CG_OPT_SCOPE }, { "--log", CG_OPT_LOG },
};
static const struct { const char *flag; enum cg_opt opt; } cg_run_switches[] = {
	{ "--disable", CG_OPT_DISABLE }, { "--audit", CG_OPT_AUDIT }, { "--record-only", CG_OPT_RECORD_ONLY },
};

static void cg_run_help(FILE *out)
{
	fprintf(out,
		"usage: cugraft run [--report PATH] [--warmup N] [--chunk N] [--scope S] [--log L]\n"
		"                   [--disable] [--audit] [--record-only] -- CMD ARGS...\n\n"
		"Runs CMD with libcugraft.so preloaded. The report goes to cugraft-%%p.jsonl unless\n"
		"--report or CUGRAFT_REPORT says otherwise; CMD's exit status is passed through.\n\n");
	cg_options_help(out);
}

/* 0 when value is acceptable for the option; else says why on stderr. */
static int cg_run_check(const char *flag, enum cg_opt o, const char *value)
{
	const struct cg_opt_info *in = cg_opt_info(o);
	long long v;
	int level;
	struct cg_scope sc;
	const char *why = NULL;
	switch (in->kind) {
	case CG_OPT_KIND_INT:
		if (cg_parse_int(value, in->min, in->max, &v) != 0)
			fprintf(stderr, "cugraft run: %s %s: want an integer in [%lld, %lld]\n", flag, value, in->min, in->max);
		else
			return 0;
		return -1;
	case CG_OPT_KIND_LEVEL:
		if (cg_parse_level(value, &level) == 0)
			return 0;
		fprintf(stderr, "cugraft run: %s %s: want error, warn, info or debug\n", flag, value);
		return -1;
	case CG_OPT_KIND_STR:
		if (strlen(value) >= CG_OPT_STR_LEN) {
			fprintf(stderr, "cugraft run: %s %.*s...: want at most %d characters\n", flag,
			        CG_OPT_SHOWN, value, CG_OPT_STR_LEN - 1);
			return -1;
		}
		if (o != CG_OPT_SCOPE || cg_scope_parse(value, &sc, &why) == 0)
			return 0;
		fprintf(stderr, "cugraft run: %s %s: %s\n", flag, value, why);
		return -1;
	case CG_OPT_KIND_BOOL:
		break;
	}
	return 0;
}

int cg_cmd_run(int argc, char **argv)
{
	int i;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			cg_run_help(stdout);
			return 0;
		}
		if (a[0] != '-')
			break;
		bool known = false;
		for (size_t k = 0; k < sizeof cg_run_switches / sizeof cg_run_switches[0]; k++)
			if (strcmp(a, cg_run_switches[k].flag) == 0) {
				setenv(cg_opt_info(cg_run_switches[k].opt)->name, "1", 1);
				known = true;
			}
		for (size_t k = 0; !known && k < sizeof cg_run_valued / sizeof cg_run_valued[0]; k++) {
			size_t n = strlen(cg_run_valued[k].flag);
			if (strncmp(a, cg_run_valued[k].flag, n) != 0 || (a[n] != '\0' && a[n] != '='))
				continue;
			const char *value = a[n] == '=' ? a + n + 1 : i + 1 < argc ? argv[++i] : NULL;
			if (value == NULL) {
				fprintf(stderr, "cugraft run: %s needs a value\n", cg_run_valued[k].flag);
				return 2;
			}
			if (cg_run_check(cg_run_valued[k].flag, cg_run_valued[k].opt, value) != 0)
				return 2;
			setenv(cg_opt_info(cg_run_valued[k].opt)->name, value, 1);
			known = true;
		}
		if (!known) {
			fprintf(stderr, "cugraft run: unknown flag %s (see cugraft run --help)\n", a);
			return 2;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "cugraft run: no command given (cugraft run [flags] -- CMD ARGS...)\n");
		return 2;
	}
	char *lib = cg_tool_library();
	if (lib == NULL)   /* (it said where it looked) */
		return 1;
	char *preload = cg_preload_value(lib);
	if (preload == NULL || setenv("LD_PRELOAD", preload, 1) != 0) {
		perror("cugraft run: LD_PRELOAD");
		return 1;
	}
	setenv(cg_opt_info(CG_OPT_REPORT)->name, "cugraft-%p.jsonl", 0);
	execvp(argv[i], argv + i);
	int err = errno;
	fprintf(stderr, "cugraft run: %s: %s\n", argv[i], strerror(err));
	return err == ENOENT ? 127 : 126;
}
