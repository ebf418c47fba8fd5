/* The CUGRAFT_* options: one table (options.def), one parser, read from the environment once.
 * A bad value warns once, naming the variable, the value and why, and keeps the default: it never
 * aborts the user's job. Also the parsed form of CUGRAFT_SCOPE. */
#ifndef CG_SHIM_OPTIONS_H
#define CG_SHIM_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct cg_json;

enum cg_opt {
#define X(id, name, kind, def, min, max, doc) CG_OPT_##id,
#include "options.def"
#undef X
	CG_OPT_COUNT
};

enum cg_opt_kind { CG_OPT_KIND_BOOL, CG_OPT_KIND_INT, CG_OPT_KIND_STR, CG_OPT_KIND_LEVEL };

/* One row of the table, for the command's help and the report renderer. */
struct cg_opt_info {
	const char *name, *def, *doc;
	enum cg_opt_kind kind;
	long long min, max;
};
const struct cg_opt_info *cg_opt_info(enum cg_opt o);

/* Parses the environment once (pthread_once; the getters call it too, so any order works). */
void cg_options_init(void);

long long cg_opt_int(enum cg_opt o);      /* INT, BOOL (0/1) and LEVEL (enum cg_log_level) */
bool cg_opt_bool(enum cg_opt o);
const char *cg_opt_str(enum cg_opt o);    /* STR; LEVEL gives its name */

/* CUGRAFT_SCOPE: a comma list. Bare words replace the default: kernels, memops, collectives,
 * streams=ID|ID (only these stream ids; decimal or 0x hex), +glob (only kernels whose name
 * matches one of the +globs), -glob (never kernels matching it; beats +glob). A list made only
 * of +/- items changes the default instead, so "+collectives" adds collectives and "-memops"
 * drops memops; a +/- item naming kernels/memops/collectives switches that flag, any other is a
 * kernel-name pattern (fnmatch). */
#define CG_SCOPE_MAX_STREAMS 16
#define CG_SCOPE_MAX_PATTERNS 16
#define CG_SCOPE_PATTERN_LEN 128
struct cg_scope {
	bool kernels, memops, collectives;
	int n_streams;                        /* 0: every stream */
	uint64_t streams[CG_SCOPE_MAX_STREAMS];
	int n_patterns;
	struct { bool include; char glob[CG_SCOPE_PATTERN_LEN]; } patterns[CG_SCOPE_MAX_PATTERNS];
};
const struct cg_scope *cg_opt_scope(void);
/* The kernel may be graphed under CUGRAFT_SCOPE (kernels on, +globs matched, no -glob). */
bool cg_scope_kernel(const char *name);
bool cg_scope_stream(uint64_t id);

/* "options":{"CUGRAFT_DISABLE":false,...} with the effective values, for the report header. */
void cg_options_json(struct cg_json *j);
/* The table as text: name, default, doc (`cugraft run --help`). */
void cg_options_help(FILE *out);

/* The parsers, exposed for the unit tests and the command. All return 0 or -EINVAL; nothing is
 * stored on error. Booleans: 1/true/yes/on, 0/false/no/off (any case). Integers: decimal with an
 * optional K/M/G suffix (x1000, x1e6, x1e9: the options count things and microseconds, not
 * bytes); a value outside [min, max], including one beyond long long, is clamped and -ERANGE
 * returned with the clamped value stored. */
/* A text option's longest value, its terminating NUL in: a longer one is ignored. */
#define CG_OPT_STR_LEN 1024
/* At most this much of a bad value a warning repeats ("..." after it): why, and the default
 * kept, still fit the line. */
#define CG_OPT_SHOWN 80
int cg_parse_bool(const char *s, bool *out);
int cg_parse_int(const char *s, long long min, long long max, long long *out);
int cg_parse_level(const char *s, int *out);
/* On error `why` (if not NULL) says what was wrong, for the warning. */
int cg_scope_parse(const char *s, struct cg_scope *out, const char **why);
bool cg_scope_match_kernel(const struct cg_scope *sc, const char *name);
bool cg_scope_match_stream(const struct cg_scope *sc, uint64_t id);

/* Reads the environment again, ignoring the once-guard: unit tests only. */
void cg_options_reload(void);

#endif
