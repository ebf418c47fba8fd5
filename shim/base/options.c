/* The options table expanded from options.def, its parsers, and the effective values. Values
 * are read from the environment once and copied: the program may change its environment later. */
#include "options.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"
#include "log.h"


static const struct cg_opt_info cg_opt_table[CG_OPT_COUNT] = {
#define X(id, name_, kind_, def_, min_, max_, doc_) \
	[CG_OPT_##id] = { .name = name_, .def = def_, .doc = doc_, .kind = CG_OPT_KIND_##kind_, \
	                  .min = min_, .max = max_ },
#include "options.def"
#undef X
};

static const char *const cg_level_names[] = { "error", "warn", "info", "debug" };

static long long cg_opt_num[CG_OPT_COUNT];
static char cg_opt_text[CG_OPT_COUNT][CG_OPT_STR_LEN];
static struct cg_scope cg_scope_value;
static pthread_once_t cg_options_once = PTHREAD_ONCE_INIT;

const struct cg_opt_info *cg_opt_info(enum cg_opt o)
{
	return &cg_opt_table[o];
}

int cg_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
		if (strcasecmp(s, yes[i]) == 0) { *out = true; return 0; }
		if (strcasecmp(s, no[i]) == 0) { *out = false; return 0; }
	}
	return -EINVAL;
}

int cg_parse_int(const char *s, long long min, long long max, long long *out)
{
	/* strtoll alone would take leading blanks, "0x", and stop at anything: be strict. */
	const char *p = s;
	bool neg = false;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (*p < '0' || *p > '9')
		return -EINVAL;
	unsigned long long v = 0;
	bool overflow = false;
	for (; *p >= '0' && *p <= '9'; p++)
		overflow |= __builtin_mul_overflow(v, 10ull, &v) || __builtin_add_overflow(v, (unsigned)(*p - '0'), &v);
	unsigned long long scale = 1;
	switch (*p) {
	case 'k': case 'K': scale = 1000ull; p++; break;
	case 'm': case 'M': scale = 1000000ull; p++; break;
	case 'g': case 'G': scale = 1000000000ull; p++; break;
	}
	if (*p != '\0')
		return -EINVAL;
	overflow |= __builtin_mul_overflow(v, scale, &v) || v > (unsigned long long)LLONG_MAX;
	long long r = overflow ? (neg ? LLONG_MIN : LLONG_MAX) : neg ? -(long long)v : (long long)v;
	if (overflow || r < min || r > max) {
		*out = r < min ? min : r > max ? max : r;
		return -ERANGE;
	}
	*out = r;
	return 0;
}

int cg_parse_level(const char *s, int *out)
{
	for (int i = 0; i < (int)(sizeof cg_level_names / sizeof cg_level_names[0]); i++)
		if (strcasecmp(s, cg_level_names[i]) == 0) { *out = i; return 0; }
	if (strcasecmp(s, "warning") == 0) { *out = CG_LOG_WARN; return 0; }
	return -EINVAL;
}

static bool cg_scope_flag(struct cg_scope *sc, const char *word, bool on)
{
	if (strcmp(word, "kernels") == 0) sc->kernels = on;
	else if (strcmp(word, "memops") == 0) sc->memops = on;
	else if (strcmp(word, "collectives") == 0) sc->collectives = on;
	else return false;
	return true;
}

/* One stream id: decimal or 0x hex, as documented (strtoull's base 0 would read 010 as octal
 * and refuse 09). Returns the end, or NULL. */
static const char *cg_scope_stream_id(const char *p, uint64_t *out)
{
	int base = 10;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
		base = 16, p += 2;
	uint64_t v = 0;
	const char *start = p;
	for (;; p++) {
		unsigned d = *p >= '0' && *p <= '9' ? (unsigned)(*p - '0') :
		             base == 16 && *p >= 'a' && *p <= 'f' ? (unsigned)(*p - 'a' + 10) :
		             base == 16 && *p >= 'A' && *p <= 'F' ? (unsigned)(*p - 'A' + 10) : 99;
		if (d == 99)
			break;
		if (__builtin_mul_overflow(v, (uint64_t)base, &v) || __builtin_add_overflow(v, d, &v))
			return NULL;
	}
	*out = v;
	return p == start ? NULL : p;
}

static int cg_scope_streams(struct cg_scope *sc, const char *list, const char **why)
{
	static const char ids_why[] = "streams= wants ids (decimal or 0x hex, up to 2^64-1) separated by |";
	const char *p = list;
	while (true) {
		uint64_t id;
		const char *end = cg_scope_stream_id(p, &id);
		if (end == NULL || (*end != '\0' && *end != ',' && *end != '|')) {
			*why = ids_why;
			return -EINVAL;
		}
		if (sc->n_streams == CG_SCOPE_MAX_STREAMS) { *why = "more than 16 stream ids"; return -EINVAL; }
		sc->streams[sc->n_streams++] = id;
		if (*end == '\0' || *end == ',')
			return (int)(end - list);
		p = end + 1;
	}
}

int cg_scope_parse(const char *s, struct cg_scope *out, const char **why)
{
	const char *dummy;
	if (why == NULL)
		why = &dummy;
	struct cg_scope sc = { 0 };
	/* Only +/- items: they modify the default; any bare item: the list replaces it. */
	bool modifies = true;
	for (const char *p = s; *p; ) {
		if (*p != '+' && *p != '-' && *p != ',')
			modifies = false;
		const char *comma = strchr(p, ',');
		p = comma ? comma + 1 : p + strlen(p);
	}
	if (modifies)
		sc.kernels = sc.memops = true;
	const char *p = s;
	while (*p) {
		size_t n = strcspn(p, ",");
		if (n == 0) { p++; continue; }
		if (strncmp(p, "streams=", 8) == 0) {
			int used = cg_scope_streams(&sc, p + 8, why);
			if (used < 0)
				return used;
			p += 8 + (size_t)used;
			continue;
		}
		char item[CG_SCOPE_PATTERN_LEN];
		if (n >= sizeof item) { *why = "item longer than 127 characters"; return -EINVAL; }
		memcpy(item, p, n);
		item[n] = '\0';
		p += n;
		if (item[0] != '+' && item[0] != '-') {
			if (!cg_scope_flag(&sc, item, true)) {
				*why = "unknown word (want kernels, memops, collectives, streams=, +glob, -glob)";
				return -EINVAL;
			}
			continue;
		}
		bool include = item[0] == '+';
		if (item[1] == '\0') { *why = "empty pattern"; return -EINVAL; }
		if (cg_scope_flag(&sc, item + 1, include))
			continue;
		if (sc.n_patterns == CG_SCOPE_MAX_PATTERNS) { *why = "more than 16 patterns"; return -EINVAL; }
		sc.patterns[sc.n_patterns].include = include;
		strcpy(sc.patterns[sc.n_patterns].glob, item + 1);
		sc.n_patterns++;
		if (include)
			sc.kernels = true;
	}
	*out = sc;
	return 0;
}

bool cg_scope_match_kernel(const struct cg_scope *sc, const char *name)
{
	if (!sc->kernels)
		return false;
	if (!name)
		name = "";  /* a kernel the driver could not name matches only "*" patterns */
	bool any_include = false, included = false;
	for (int i = 0; i < sc->n_patterns; i++) {
		bool match = fnmatch(sc->patterns[i].glob, name, 0) == 0;
		if (!sc->patterns[i].include && match)
			return false;
		if (sc->patterns[i].include) {
			any_include = true;
			included |= match;
		}
	}
	return !any_include || included;
}

bool cg_scope_match_stream(const struct cg_scope *sc, uint64_t id)
{
	if (sc->n_streams == 0)
		return true;
	for (int i = 0; i < sc->n_streams; i++)
		if (sc->streams[i] == id)
			return true;
	return false;
}

/* Parses one value into the effective tables; on error warns and returns nonzero. */
static int cg_option_set(enum cg_opt o, const char *val)
{
	const struct cg_opt_info *in = &cg_opt_table[o];
	const char *why = NULL;
	int rc = 0;
	switch (in->kind) {
	case CG_OPT_KIND_BOOL: {
		bool b;
		if ((rc = cg_parse_bool(val, &b)) == 0)
			cg_opt_num[o] = b;
		else
			why = "not a boolean (want 1/true/yes/on or 0/false/no/off)";
		break;
	}
	case CG_OPT_KIND_INT: {
		long long v;
		rc = cg_parse_int(val, in->min, in->max, &v);
		if (rc == -ERANGE) {
			int shown = (int)strnlen(val, CG_OPT_SHOWN);
			cg_log(CG_LOG_WARN, "%s=%.*s%s is outside [%lld, %lld]; using %lld", in->name,
			       shown, val, val[shown] ? "..." : "", in->min, in->max, v);
			cg_opt_num[o] = v;
			return 0;
		}
		if (rc == 0)
			cg_opt_num[o] = v;
		else
			why = "not an integer (want digits with an optional K, M or G suffix)";
		break;
	}
	case CG_OPT_KIND_LEVEL: {
		int lvl;
		if ((rc = cg_parse_level(val, &lvl)) == 0) {
			cg_opt_num[o] = lvl;
			val = cg_level_names[lvl];
		} else {
			why = "not a level (want error, warn, info or debug)";
		}
		break;
	}
	case CG_OPT_KIND_STR:
		if (strlen(val) >= CG_OPT_STR_LEN) {
			why = "longer than 1023 characters";
			rc = -EINVAL;
		} else if (o == CG_OPT_SCOPE) {
			rc = cg_scope_parse(val, &cg_scope_value, &why);
		}
		break;
	}
	if (rc != 0) {
		/* the value cut short where long, so that why and the default still fit the line */
		int shown = (int)strnlen(val, CG_OPT_SHOWN);
		cg_log(CG_LOG_WARN, "%s=%.*s%s ignored: %s; keeping the default \"%s\"", in->name, shown,
		       val, val[shown] ? "..." : "", why, in->def);
		return rc;
	}
	if (in->kind == CG_OPT_KIND_STR || in->kind == CG_OPT_KIND_LEVEL)
		strcpy(cg_opt_text[o], val);
	return 0;
}

void cg_options_reload(void)
{
	/* Defaults first: they are valid by construction (a unit test parses every one). */
	for (int o = 0; o < CG_OPT_COUNT; o++) {
		cg_opt_text[o][0] = '\0';
		cg_option_set((enum cg_opt)o, cg_opt_table[o].def);
	}
	/* CUGRAFT_LOG first, so that it filters the warnings about the others; its own warning
	 * shows at the level in force before options are parsed. */
	cg_log_set_level(CG_LOG_WARN);
	const char *level = getenv(cg_opt_table[CG_OPT_LOG].name);
	if (level != NULL)
		cg_option_set(CG_OPT_LOG, level);
	cg_log_set_level((enum cg_log_level)cg_opt_num[CG_OPT_LOG]);
	for (int o = 0; o < CG_OPT_COUNT; o++) {
		const char *val = getenv(cg_opt_table[o].name);
		if (val != NULL && o != CG_OPT_LOG)
			cg_option_set((enum cg_opt)o, val);
	}
}

void cg_options_init(void)
{
	pthread_once(&cg_options_once, cg_options_reload);
}

long long cg_opt_int(enum cg_opt o)
{
	cg_options_init();
	return cg_opt_num[o];
}

bool cg_opt_bool(enum cg_opt o)
{
	cg_options_init();
	return cg_opt_num[o] != 0;
}

const char *cg_opt_str(enum cg_opt o)
{
	cg_options_init();
	return cg_opt_text[o];
}

const struct cg_scope *cg_opt_scope(void)
{
	cg_options_init();
	return &cg_scope_value;
}

bool cg_scope_kernel(const char *name)
{
	return cg_scope_match_kernel(cg_opt_scope(), name);
}

bool cg_scope_stream(uint64_t id)
{
	return cg_scope_match_stream(cg_opt_scope(), id);
}

void cg_options_json(struct cg_json *j)
{
	cg_options_init();
	cg_json_obj(j, "options");
	for (int o = 0; o < CG_OPT_COUNT; o++) {
		const struct cg_opt_info *in = &cg_opt_table[o];
		switch (in->kind) {
		case CG_OPT_KIND_BOOL: cg_json_bool(j, in->name, cg_opt_num[o] != 0); break;
		case CG_OPT_KIND_INT: cg_json_int(j, in->name, cg_opt_num[o]); break;
		case CG_OPT_KIND_STR:
		case CG_OPT_KIND_LEVEL: cg_json_str(j, in->name, cg_opt_text[o]); break;
		}
	}
	cg_json_obj_end(j);
}

void cg_options_help(FILE *out)
{
	fprintf(out, "Environment (each `cugraft run` flag sets one of these):\n");
	for (int o = 0; o < CG_OPT_COUNT; o++) {
		const struct cg_opt_info *in = &cg_opt_table[o];
		fprintf(out, "  %-22s default \"%s\"\n      %s\n", in->name, in->def, in->doc);
	}
}
