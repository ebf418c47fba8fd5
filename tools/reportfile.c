/* Report loading and merging for the command. A bad line is named on stderr (file:line) and
 * skipped; the rest of the file is still used. A file's records are separated by process. */
#include "reportfile.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

static void *cg_grow(void *p, size_t n, size_t size)
{
	p = n > SIZE_MAX / size ? NULL : realloc(p, n * size);
	if (p == NULL) {
		fputs("cugraft: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

/* Appends with doubling: a file of a million records must not copy its list a million times. */
static void cg_push(struct jv ***list, size_t *n, struct jv *v)
{
	if ((*n & (*n - 1)) == 0)   /* 0, 1, 2, 4, ...: full */
		*list = cg_grow(*list, *n ? 2 * *n : 1, sizeof **list);
	(*list)[(*n)++] = v;
}

/* The longest line read, in bytes. cugraft writes records of at most 16 KiB (CG_JSON_CAP);
 * merged or hand-made reports stay far below this. Past it a file is not a report (/dev/zero is
 * one endless line) and reading it stops, in bounded memory. */
#define CG_RFILE_LINE_MAX (64u << 20)

/* Reads one line, its newline included when there is one, into *buf (NUL bytes kept). Returns
 * its length; 0 at the end of the file; -1 when it exceeds CG_RFILE_LINE_MAX. */
static ssize_t cg_read_line(FILE *in, char **buf, size_t *cap)
{
	size_t len = 0;
	int c;
	while ((c = getc_unlocked(in)) != EOF) {
		if (len + 2 > *cap) {
			if (*cap >= CG_RFILE_LINE_MAX)
				return -1;
			*cap = *cap ? 2 * *cap : 4096;
			*buf = cg_grow(*buf, *cap, 1);
		}
		(*buf)[len++] = (char)c;
		if (c == '\n')
			break;
	}
	if (len > 0)
		(*buf)[len] = '\0';
	return (ssize_t)len;
}

/* Summary members that are numbers: the engine's counters (policy/stats.def) and the shim's
 * own totals the command renders. The name as a static string, or NULL. */
static const char *cg_number_key(const char *key)
{
	static const char *const keys[] = {
#define CG_STAT(field, key, doc) key,
#define CG_STAT_RATIO(key, num, den)
#include "policy/stats.def"
#undef CG_STAT
#undef CG_STAT_RATIO
		"launches", "host_time_saved_us", "ops_in_program_captures", "escaped_launches",
		"collectives_graphed", "graph_memory_peak_bytes", "graph_build_us", "patch_us",
		"graph_launch_us", "launch_call_us", "launch_call_count", "launch_forward_us",
		"launch_forward_count", "launch_replay_us", "launch_flush_us", "launch_flush_ops",
		"flush_us", "flush_ops",
		"wait_call_us", "wait_call_count",
		"wait_flush_us", "wait_flush_count",
	};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (keys[i] != NULL && strcmp(keys[i], key) == 0)
			return keys[i];
	return NULL;
}

static const char *cg_type_name(const struct jv *v)
{
	static const char *const names[] = { [JV_NULL] = "null", [JV_BOOL] = "a boolean",
	                                     [JV_NUM] = "a number", [JV_STR] = "a string",
	                                     [JV_ARR] = "an array", [JV_OBJ] = "an object" };
	return names[v->type];
}

/* Summary members of other shapes: objects of counts by name, objects, arrays. */
static const struct { const char *key; enum jv_type type; bool counts; } cg_shaped[] = {
	{ "fallbacks", JV_OBJ, true }, { "boundaries", JV_OBJ, true },
	{ "entry_points", JV_OBJ, true }, { "unclassified_entry_points", JV_OBJ, true },
	{ "control", JV_OBJ, false }, { "devices", JV_ARR, false }, { "streams", JV_ARR, false },
	{ "kernels", JV_ARR, false }, { "divergence_sites", JV_ARR, false },
};

/* The shape summary member `key` must have (its entry of cg_shaped), or NULL. */
static int cg_shape_of(const char *key)
{
	for (size_t i = 0; i < sizeof cg_shaped / sizeof cg_shaped[0]; i++)
		if (strcmp(cg_shaped[i].key, key) == 0)
			return (int)i;
	return -1;
}

/* The first member of a summary of the wrong type (a number that is none, an object or array
 * that is none, a count in an object of counts that is no number), each named on stderr; NULL
 * if none. */
static const char *cg_summary_mistyped(const struct jv *s, const char *path, size_t lineno)
{
	static const char *const want[] = { [JV_NUM] = "a number", [JV_OBJ] = "an object",
	                                    [JV_ARR] = "an array" };
	const char *first = NULL;
	for (size_t i = 0; i < s->n; i++) {
		const struct jv *v = s->items[i];
		const char *key = cg_number_key(s->keys[i]), *inner = NULL;
		enum jv_type type = JV_NUM;
		int shape = key ? -1 : cg_shape_of(s->keys[i]);
		if (shape >= 0) {
			key = cg_shaped[shape].key;
			type = cg_shaped[shape].type;
		}
		if (key == NULL)
			continue;
		if (v->type == type && shape >= 0 && cg_shaped[shape].counts)
			for (size_t k = 0; k < v->n && inner == NULL; k++)
				if (v->items[k]->type != JV_NUM) {
					inner = v->keys[k];
					v = v->items[k];
				}
		if (v->type == type && inner == NULL)
			continue;
		if (inner)
			fprintf(stderr, "cugraft report: %s:%zu: the summary's \"%s\" has \"%s\" %s, not a "
			        "number\n", path, lineno, key, inner, cg_type_name(v));
		else
			fprintf(stderr, "cugraft report: %s:%zu: the summary's \"%s\" is %s, not %s\n", path,
			        lineno, key, cg_type_name(v), want[type]);
		if (first == NULL)
			first = key;
	}
	return first;
}

static struct cg_rproc *cg_proc_new(struct cg_rfile *f, double pid)
{
	if ((f->n_procs & (f->n_procs - 1)) == 0)   /* 0, 1, 2, 4, ...: full */
		f->procs = cg_grow(f->procs, f->n_procs ? 2 * f->n_procs : 1, sizeof *f->procs);
	struct cg_rproc *p = &f->procs[f->n_procs++];
	memset(p, 0, sizeof *p);
	p->path = f->path;
	p->pid = pid;
	return p;
}

static void cg_proc_add(struct cg_rproc *p, const char *event, struct jv *v)
{
	if (strcmp(event, "header") == 0 && p->header == NULL)
		p->header = v;
	else if (strcmp(event, "summary") == 0) {
		if (p->summary)
			cg_push(&p->others, &p->n_others, p->summary);
		p->summary = v;
	} else if (strcmp(event, "fallback") == 0)
		cg_push(&p->fallbacks, &p->n_fallbacks, v);
	else if (strcmp(event, "suppressed") == 0)
		cg_push(&p->suppressed, &p->n_suppressed, v);
	else
		cg_push(&p->others, &p->n_others, v);
}

/* The process a record goes to: a header opens one; a record with a pid goes to the last one
 * opened with that pid (a new one without a header when none was); one without a pid goes to
 * the last opened (*guessed counts those). by_pid maps a pid's text to its last process + 1. */
static size_t cg_proc_of(struct cg_rfile *f, struct cg_counts *by_pid, const char *event,
                         const struct jv *v, size_t *guessed)
{
	const struct jv *pv = jv_get(v, "pid");
	bool header = strcmp(event, "header") == 0;
	if (pv == NULL || pv->type != JV_NUM) {
		if (header || f->n_procs == 0)
			cg_proc_new(f, -1);
		else
			(*guessed)++;
		return f->n_procs - 1;
	}
	double pid = pv->num == 0 ? 0 : pv->num;   /* -0 is 0 */
	char key[40];
	snprintf(key, sizeof key, "%.17g", pid);
	size_t i = cg_counts_find(by_pid, key);
	if (!header && i < by_pid->n)
		return (size_t)by_pid->counts[i] - 1;
	cg_proc_new(f, pid);
	if (i == by_pid->n)
		cg_counts_add(by_pid, key, 0);
	by_pid->counts[cg_counts_find(by_pid, key)] = (double)f->n_procs;
	return f->n_procs - 1;
}

bool cg_rfile_load(struct cg_rfile *f, const char *path)
{
	memset(f, 0, sizeof *f);
	f->path = path;
	FILE *in = fopen(path, "r");
	struct stat st;
	if (in == NULL || fstat(fileno(in), &st) != 0) {
		fprintf(stderr, "cugraft report: %s: %s\n", path, strerror(errno));
		if (in)
			fclose(in);
		return false;
	}
	if (S_ISDIR(st.st_mode)) {
		fprintf(stderr, "cugraft report: %s: is a directory (name the report files in it)\n", path);
		fclose(in);
		return false;
	}
	char *line = NULL;
	size_t cap = 0, lineno = 0, guessed = 0;
	struct cg_counts by_pid = { 0 };
	ssize_t len;
	while ((len = cg_read_line(in, &line, &cap)) > 0) {
		lineno++;
		bool ended = line[len - 1] == '\n';
		char err[160];
		struct jv *v = jv_parse(line, (size_t)len, err, sizeof err);
		const char *event = jv_str(jv_get(v, "event"));
		if (v == NULL || event == NULL) {
			fprintf(stderr, "cugraft report: %s:%zu: %s%s\n", path, lineno,
			        v == NULL ? err : "not a report record (no \"event\")",
			        ended ? "" : " (the line is cut: the process died while writing?)");
			f->bad_lines++;
			jv_free(v);
			continue;
		}
		f->records++;
		size_t k = cg_proc_of(f, &by_pid, event, v, &guessed);   /* may move f->procs */
		struct cg_rproc *p = &f->procs[k];
		if (strcmp(event, "summary") == 0) {
			p->mistyped = cg_summary_mistyped(v, path, lineno);
			f->bad_lines += p->mistyped != NULL;
		}
		cg_proc_add(p, event, v);
	}
	free(line);
	fclose(in);
	cg_counts_free(&by_pid);
	if (len < 0) {
		fprintf(stderr, "cugraft report: %s:%zu: a line longer than %u MiB (the limit: cugraft's records "
		        "are at most 16 KiB); not a report, not read further\n", path, lineno + 1,
		        CG_RFILE_LINE_MAX >> 20);
		cg_rfile_free(f);
		return false;
	}
	if (f->records == 0) {
		if (lineno == 0)
			fprintf(stderr, "cugraft report: %s: empty: no cugraft records\n", path);
		else
			fprintf(stderr, "cugraft report: %s: no cugraft records in %zu line%s\n", path, lineno,
			        lineno == 1 ? "" : "s");
		cg_rfile_free(f);
		return false;
	}
	if (guessed > 0 && f->n_procs > 1)
		fprintf(stderr, "cugraft report: %s: %zu records carry no pid (an older cugraft wrote them) in "
		        "a file of %zu processes: each is counted with the process whose header precedes "
		        "it, wrong where the processes ran at the same time\n", path, guessed, f->n_procs);
	return true;
}

static void cg_rproc_free(struct cg_rproc *p)
{
	jv_free(p->header);
	jv_free(p->summary);
	for (size_t i = 0; i < p->n_fallbacks; i++)
		jv_free(p->fallbacks[i]);
	for (size_t i = 0; i < p->n_suppressed; i++)
		jv_free(p->suppressed[i]);
	for (size_t i = 0; i < p->n_others; i++)
		jv_free(p->others[i]);
	free(p->fallbacks);
	free(p->suppressed);
	free(p->others);
}

void cg_rfile_free(struct cg_rfile *f)
{
	for (size_t i = 0; i < f->n_procs; i++)
		cg_rproc_free(&f->procs[i]);
	free(f->procs);
	f->procs = NULL;
	f->n_procs = 0;
}

static size_t cg_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return (size_t)(h ^ (h >> 32));
}

static void cg_counts_index(struct cg_counts *c, size_t i)
{
	size_t mask = c->n_slots - 1;
	for (size_t h = cg_hash(c->names[i]); ; h++)
		if (c->slots[h & mask] == 0) {
			c->slots[h & mask] = i + 1;
			return;
		}
}

/* Keeps the table at most half full. */
static void cg_counts_rehash(struct cg_counts *c, size_t want)
{
	size_t n_slots = 16;
	while (n_slots < 2 * want)
		n_slots *= 2;
	free(c->slots);
	c->slots = calloc(n_slots, sizeof *c->slots);
	if (c->slots == NULL) {
		fputs("cugraft: out of memory\n", stderr);
		exit(1);
	}
	c->n_slots = n_slots;
	for (size_t i = 0; i < c->n; i++)
		cg_counts_index(c, i);
}

size_t cg_counts_find(const struct cg_counts *c, const char *name)
{
	if (c->n_slots == 0)
		return c->n;
	size_t mask = c->n_slots - 1;
	for (size_t h = cg_hash(name); c->slots[h & mask] != 0; h++)
		if (strcmp(c->names[c->slots[h & mask] - 1], name) == 0)
			return c->slots[h & mask] - 1;
	return c->n;
}

void cg_counts_add(struct cg_counts *c, const char *name, double count)
{
	size_t i = cg_counts_find(c, name);
	if (i < c->n) {
		c->counts[i] += count;
		return;
	}
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 8;
		c->names = cg_grow(c->names, c->cap, sizeof *c->names);
		c->counts = cg_grow(c->counts, c->cap, sizeof *c->counts);
	}
	if ((c->names[c->n] = strdup(name)) == NULL) {
		fputs("cugraft: out of memory\n", stderr);
		exit(1);
	}
	c->counts[c->n++] = count;
	if (2 * c->n > c->n_slots)
		cg_counts_rehash(c, c->n);
	else
		cg_counts_index(c, c->n - 1);
}

struct cg_sort_item {
	double count;
	size_t seen;
	char *name;
};

/* Largest first, NaN (an overflow summed with its negative) last, then first-seen order. */
static int cg_sort_cmp(const void *pa, const void *pb)
{
	const struct cg_sort_item *a = pa, *b = pb;
	if (!isnan(a->count) != !isnan(b->count))   /* isnan: any non-zero */
		return isnan(a->count) ? 1 : -1;
	if (a->count > b->count)
		return -1;
	if (a->count < b->count)
		return 1;
	return a->seen < b->seen ? -1 : a->seen > b->seen;
}

void cg_counts_sort(struct cg_counts *c)
{
	if (c->n < 2)
		return;
	struct cg_sort_item *items = cg_grow(NULL, c->n, sizeof *items);
	for (size_t i = 0; i < c->n; i++)
		items[i] = (struct cg_sort_item){ c->counts[i], i, c->names[i] };
	qsort(items, c->n, sizeof *items, cg_sort_cmp);
	for (size_t i = 0; i < c->n; i++) {
		c->counts[i] = items[i].count;
		c->names[i] = items[i].name;
	}
	free(items);
	cg_counts_rehash(c, c->n);
}

void cg_counts_free(struct cg_counts *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->names[i]);
	free(c->names);
	free(c->counts);
	free(c->slots);
	memset(c, 0, sizeof *c);
}

/* The map named `name` of the parallel (names, maps) pair, created empty when new. */
static struct cg_counts *cg_map_get(struct cg_counts *names, struct cg_counts **maps, const char *name)
{
	size_t i = cg_counts_find(names, name);
	if (i == names->n) {
		cg_counts_add(names, name, 0);
		if ((i & (i - 1)) == 0)   /* doubling, as names grows */
			*maps = cg_grow(*maps, i ? 2 * i : 1, sizeof **maps);
		memset(&(*maps)[i], 0, sizeof (*maps)[i]);
	}
	return &(*maps)[i];
}

static bool cg_is_version(const char *key)
{
	size_t n = strlen(key);
	return n >= 8 && strcmp(key + n - 8, "_version") == 0;
}

/* A finite number as JSON, shortest of %.15g / %.17g that reads back the same; NaN and
 * infinities (sums past double's range) as null. */
static void cg_num_text(double v, char *buf, size_t size)
{
	if (!isfinite(v))
		snprintf(buf, size, "null");
	else if (v == floor(v) && fabs(v) < 9007199254740992.0)
		snprintf(buf, size, "%.0f", v);
	else if (snprintf(buf, size, "%.15g", v), strtod(buf, NULL) != v)
		snprintf(buf, size, "%.17g", v);
}

/* A version is one value per rank: files that differ are kept apart, counted by value. Values
 * are kept as 'n' + number text or 's' + string. */
static void cg_merged_version(struct cg_merged *m, const char *key, const struct jv *v)
{
	if (v == NULL || (v->type != JV_NUM && v->type != JV_STR))
		return;
	char num[40], *text;
	if (v->type == JV_NUM) {
		num[0] = 'n';
		cg_num_text(v->num, num + 1, sizeof num - 1);
		text = strdup(num);
	} else {
		text = malloc(strlen(v->str) + 2);
		if (text)
			text[0] = 's', strcpy(text + 1, v->str);
	}
	if (text == NULL) {
		fputs("cugraft: out of memory\n", stderr);
		exit(1);
	}
	cg_counts_add(cg_map_get(&m->version_names, &m->versions, key), text, 1);
	free(text);
}

void cg_version_print(FILE *out, const char *value, bool json)
{
	if (value[0] == 's' && json)
		jv_print_string(out, value + 1);
	else
		fputs(value + 1, out);
}

/* Ratios and the record's own fields are not summed. */
/* The summary's ratios (policy/stats.def): recomputed from the merged counters, never summed. */
static bool cg_is_ratio(const char *key)
{
#define CG_STAT(field, key, doc)
#define CG_STAT_RATIO(rkey, num, den) if (strcmp(key, rkey) == 0) return true;
#include "policy/stats.def"
#undef CG_STAT
#undef CG_STAT_RATIO
	return false;
}

static bool cg_summed(const char *key)
{
	return strcmp(key, "t") != 0 && strcmp(key, "pid") != 0 && strcmp(key, "rank") != 0 &&
	       !cg_is_ratio(key) && !cg_is_version(key);
}

/* "<at> <ops> <length of expected>:<expected><got>": names may hold any character. */
/* c[name] becomes v where it has none, or where v is less (`least`) or more than it. */
static void cg_counts_extreme(struct cg_counts *c, const char *name, double v, bool least)
{
	size_t i = cg_counts_find(c, name);
	if (i == c->n)
		cg_counts_add(c, name, v);
	else if (least ? v < c->counts[i] : v > c->counts[i])
		c->counts[i] = v;
}

static void cg_site_add(struct cg_merged *m, const struct jv *v)
{
	const char *expected = jv_str(jv_get(v, "expected")), *got = jv_str(jv_get(v, "got"));
	double at = jv_num(jv_get(v, "at"), -1), ops = jv_num(jv_get(v, "ops"), -1);
	double count = jv_num(jv_get(v, "count"), 0);
	if (!expected || !got || !(at >= 0 && at < 4294967296.0) || !(ops >= 0 && ops < 4294967296.0) ||
	    !(count > 0))
		return;
	size_t elen = strlen(expected), size = elen + strlen(got) + 40;
	char *name = cg_grow(NULL, size, 1);
	snprintf(name, size, "%u %u %zu:%s%s", (unsigned)at, (unsigned)ops, elen, expected, got);
	cg_counts_add(&m->sites, name, count);
	double first = jv_num(jv_get(v, "first_op"), -1), last = jv_num(jv_get(v, "last_op"), -1);
	if (first >= 0 && last >= first) {
		cg_counts_extreme(&m->site_first, name, first, true);
		cg_counts_extreme(&m->site_last, name, last, false);
	}
	free(name);
}

bool cg_site_read(const char *name, struct cg_site *out)
{
	unsigned long long elen;
	int end = 0;
	if (sscanf(name, "%u %u %llu:%n", &out->at, &out->ops, &elen, &end) != 3 || !end ||
	    strlen(name + end) < elen || elen > INT_MAX)
		return false;
	out->expected = name + end;
	out->expected_len = (int)elen;
	out->got = name + end + elen;
	return true;
}

void cg_merged_add_file(struct cg_merged *m, const struct cg_rfile *f)
{
	m->files++;
	for (size_t i = 0; i < f->n_procs; i++)
		cg_merged_add(m, &f->procs[i]);
}

/* Members counted by another member (cg_merged_along). */
static const char *const cg_counted_by[][2] = {
	{ "graph_launch_us", "graph_launches" },
	{ "patch_us", "patches" },
	{ "chunks_launched_8_times", "chunks_learned" },
};

static void cg_merged_along_add(struct cg_merged *m, const struct jv *s)
{
	for (size_t i = 0; i < sizeof cg_counted_by / sizeof cg_counted_by[0]; i++) {
		const struct jv *v = jv_get(s, cg_counted_by[i][0]);
		if (v != NULL && v->type == JV_NUM)
			cg_counts_add(&m->along, cg_counted_by[i][0], jv_num(jv_get(s, cg_counted_by[i][1]), 0));
	}
}

void cg_merged_add(struct cg_merged *m, const struct cg_rproc *f)
{
	m->processes++;
	if (m->mistyped == NULL)
		m->mistyped = f->mistyped;
	const struct jv *s = f->summary;
	/* libnccl loaded after the header: the summary says which; otherwise the header does. */
	const struct jv *nccl = jv_get(s, "nccl_version");
	if (nccl == NULL || nccl->type == JV_NULL)
		nccl = jv_get(f->header, "nccl_version");
	cg_merged_version(m, "nccl_version", nccl);
	if (s == NULL) {
		/* A fallback record is one fallback (the writer has no count; suppressed ones are
		 * counted only in a summary). */
		m->partial++;
		struct cg_counts *fb = cg_map_get(&m->map_names, &m->maps, "fallbacks");
		for (size_t i = 0; i < f->n_fallbacks; i++) {
			const char *reason = jv_str(jv_get(f->fallbacks[i], "reason"));
			cg_counts_add(fb, reason ? reason : "?", 1);
		}
		return;
	}
	cg_merged_along_add(m, s);
	for (size_t i = 0; i < s->n; i++) {
		const struct jv *v = s->items[i];
		const char *key = s->keys[i];
		if (v->type == JV_NUM && cg_summed(key)) {
			cg_counts_add(&m->totals, key, v->num);
		} else if (v->type == JV_NUM && cg_is_version(key) && strcmp(key, "nccl_version") != 0) {
			cg_merged_version(m, key, v);
		} else if (v->type == JV_OBJ && strcmp(key, "control") != 0) {
			/* (the deferral controller's state is one process's: rendered per file) */
			struct cg_counts *c = cg_map_get(&m->map_names, &m->maps, key);
			for (size_t k = 0; k < v->n; k++)
				if (v->items[k]->type == JV_NUM)
					cg_counts_add(c, v->keys[k], v->items[k]->num);
		} else if (v->type == JV_ARR && strcmp(key, "kernels") == 0) {
			for (size_t k = 0; k < v->n; k++) {
				const char *name = jv_str(jv_get(v->items[k], "name"));
				if (name)
					cg_counts_add(&m->kernels, name, jv_num(jv_get(v->items[k], "launches"), 0));
			}
		} else if (v->type == JV_ARR && strcmp(key, "divergence_sites") == 0) {
			for (size_t k = 0; k < v->n; k++)
				cg_site_add(m, v->items[k]);
		}
	}
}

double cg_merged_total(const struct cg_merged *m, const char *name, double def)
{
	size_t i = cg_counts_find(&m->totals, name);
	return i < m->totals.n ? m->totals.counts[i] : def;
}

bool cg_merged_site_span(const struct cg_merged *m, const char *name, double *first, double *last)
{
	size_t i = cg_counts_find(&m->site_first, name), k = cg_counts_find(&m->site_last, name);
	if (i == m->site_first.n || k == m->site_last.n)
		return false;
	*first = m->site_first.counts[i];
	*last = m->site_last.counts[k];
	return true;
}

double cg_merged_along(const struct cg_merged *m, const char *name, double def)
{
	size_t i = cg_counts_find(&m->along, name);
	return i < m->along.n ? m->along.counts[i] : def;
}

const struct cg_counts *cg_merged_map(const struct cg_merged *m, const char *name)
{
	size_t i = cg_counts_find(&m->map_names, name);
	return i < m->map_names.n ? &m->maps[i] : NULL;
}

const struct cg_counts *cg_merged_versions(const struct cg_merged *m, const char *name)
{
	size_t i = cg_counts_find(&m->version_names, name);
	return i < m->version_names.n ? &m->versions[i] : NULL;
}

static void cg_print_num(FILE *out, double v)
{
	char text[40];
	cg_num_text(v, text, sizeof text);
	fputs(text, out);
}

/* A ratio, short (%.6g), null when not finite. */
static void cg_print_ratio(FILE *out, const char *key, double v)
{
	if (isfinite(v))
		fprintf(out, ",\"%s\":%.6g", key, v);
	else
		fprintf(out, ",\"%s\":null", key);
}

void cg_merged_json(FILE *out, const struct cg_merged *m)
{
	fprintf(out, "{\"files\":%zu,\"processes\":%zu,\"processes_without_summary\":%zu", m->files,
	        m->processes, m->partial);
	for (size_t i = 0; i < m->totals.n; i++) {
		fputc(',', out);
		jv_print_string(out, m->totals.names[i]);
		fputc(':', out);
		cg_print_num(out, m->totals.counts[i]);
	}
	/* The ratios, from the merged counters (the summary names each counter by its field). */
#define CG_STAT(field, key, doc)
#define CG_STAT_RATIO(key, num, den)                                                            \
	if (cg_merged_total(m, #den, 0) > 0)                                                     \
		cg_print_ratio(out, key, cg_merged_total(m, #num, 0) / cg_merged_total(m, #den, 0));
#include "policy/stats.def"
#undef CG_STAT
#undef CG_STAT_RATIO
	/* One version: the value; ranks that differ: null, and each value with its file count. */
	for (size_t i = 0; i < m->version_names.n; i++) {
		const struct cg_counts *v = &m->versions[i];
		fputc(',', out);
		jv_print_string(out, m->version_names.names[i]);
		fputc(':', out);
		if (v->n == 1) {
			cg_version_print(out, v->names[0], true);
			continue;
		}
		fputs("null", out);
		fputc(',', out);
		size_t klen = strlen(m->version_names.names[i]);
		char *key = cg_grow(NULL, klen + 2, 1);
		snprintf(key, klen + 2, "%ss", m->version_names.names[i]);
		jv_print_string(out, key);
		free(key);
		fputs(":{", out);
		for (size_t k = 0; k < v->n; k++) {
			if (k)
				fputc(',', out);
			jv_print_string(out, v->names[k] + 1);
			fputc(':', out);
			cg_print_num(out, v->counts[k]);
		}
		fputc('}', out);
	}
	for (size_t i = 0; i < m->map_names.n; i++) {
		fputc(',', out);
		jv_print_string(out, m->map_names.names[i]);
		fputs(":{", out);
		for (size_t k = 0; k < m->maps[i].n; k++) {
			if (k)
				fputc(',', out);
			jv_print_string(out, m->maps[i].names[k]);
			fputc(':', out);
			cg_print_num(out, m->maps[i].counts[k]);
		}
		fputc('}', out);
	}
	struct cg_counts top = { 0 };   /* sorted view: a copy */
	for (size_t k = 0; k < m->kernels.n; k++)
		cg_counts_add(&top, m->kernels.names[k], m->kernels.counts[k]);
	cg_counts_sort(&top);
	fputs(",\"kernels\":[", out);
	for (size_t k = 0; k < top.n && k < 20; k++) {
		fputs(k ? ",{\"name\":" : "{\"name\":", out);
		jv_print_string(out, top.names[k]);
		fputs(",\"launches\":", out);
		cg_print_num(out, top.counts[k]);
		fputc('}', out);
	}
	fputc(']', out);
	cg_counts_free(&top);
	for (size_t k = 0; k < m->sites.n; k++)
		cg_counts_add(&top, m->sites.names[k], m->sites.counts[k]);
	cg_counts_sort(&top);
	fputs(",\"divergence_sites\":[", out);
	for (size_t k = 0, shown = 0; k < top.n && shown < 5; k++) {
		struct cg_site site;
		if (!cg_site_read(top.names[k], &site))
			continue;
		char *expected = strndup(site.expected, (size_t)site.expected_len);
		if (!expected) {
			fputs("cugraft: out of memory\n", stderr);
			exit(1);
		}
		fputs(shown++ ? ",{\"expected\":" : "{\"expected\":", out);
		jv_print_string(out, expected);
		fputs(",\"got\":", out);
		jv_print_string(out, site.got);
		fprintf(out, ",\"at\":%u,\"ops\":%u,\"count\":", site.at, site.ops);
		cg_print_num(out, top.counts[k]);
		double first, last;
		if (cg_merged_site_span(m, top.names[k], &first, &last)) {
			fputs(",\"first_op\":", out);
			cg_print_num(out, first);
			fputs(",\"last_op\":", out);
			cg_print_num(out, last);
		}
		fputc('}', out);
		free(expected);
	}
	fputs("]}\n", out);
	cg_counts_free(&top);
}

void cg_merged_free(struct cg_merged *m)
{
	cg_counts_free(&m->totals);
	cg_counts_free(&m->along);
	cg_counts_free(&m->kernels);
	cg_counts_free(&m->sites);
	cg_counts_free(&m->site_first);
	cg_counts_free(&m->site_last);
	for (size_t i = 0; i < m->map_names.n; i++)
		cg_counts_free(&m->maps[i]);
	for (size_t i = 0; i < m->version_names.n; i++)
		cg_counts_free(&m->versions[i]);
	cg_counts_free(&m->map_names);
	cg_counts_free(&m->version_names);
	free(m->maps);
	free(m->versions);
}
