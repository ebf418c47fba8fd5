/* Report loading and merging for the command. A bad line is named on stderr (file:line) and
 * skipped; the rest of the file is still used. */
#include "reportfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void cg_push(struct jv ***list, size_t *n, struct jv *v)
{
	*list = realloc(*list, (*n + 1) * sizeof **list);
	if (*list == NULL) {
		fputs("cugraft: out of memory\n", stderr);
		exit(1);
	}
	(*list)[(*n)++] = v;
}

bool cg_rfile_load(struct cg_rfile *f, const char *path)
{
	memset(f, 0, sizeof *f);
	f->path = path;
	FILE *in = fopen(path, "r");
	if (in == NULL) {
		fprintf(stderr, "cugraft report: %s: %s\n", path, strerror(errno));
		return false;
	}
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, in)) > 0) {
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
		if (strcmp(event, "header") == 0 && f->header == NULL)
			f->header = v;
		else if (strcmp(event, "summary") == 0) {
			if (f->summary)
				cg_push(&f->others, &f->n_others, f->summary);
			f->summary = v;
		} else if (strcmp(event, "fallback") == 0)
			cg_push(&f->fallbacks, &f->n_fallbacks, v);
		else if (strcmp(event, "suppressed") == 0)
			cg_push(&f->suppressed, &f->n_suppressed, v);
		else
			cg_push(&f->others, &f->n_others, v);
	}
	free(line);
	fclose(in);
	return true;
}

void cg_rfile_free(struct cg_rfile *f)
{
	jv_free(f->header);
	jv_free(f->summary);
	for (size_t i = 0; i < f->n_fallbacks; i++)
		jv_free(f->fallbacks[i]);
	for (size_t i = 0; i < f->n_suppressed; i++)
		jv_free(f->suppressed[i]);
	for (size_t i = 0; i < f->n_others; i++)
		jv_free(f->others[i]);
	free(f->fallbacks);
	free(f->suppressed);
	free(f->others);
}

void cg_counts_add(struct cg_counts *c, const char *name, double count)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->names[i], name) == 0) {
			c->counts[i] += count;
			return;
		}
	c->names = realloc(c->names, (c->n + 1) * sizeof *c->names);
	c->counts = realloc(c->counts, (c->n + 1) * sizeof *c->counts);
	if (c->names == NULL || c->counts == NULL || (c->names[c->n] = strdup(name)) == NULL) {
		fputs("cugraft: out of memory\n", stderr);
		exit(1);
	}
	c->counts[c->n++] = count;
}

void cg_counts_sort(struct cg_counts *c)
{
	for (size_t i = 1; i < c->n; i++)   /* insertion sort: stable, lists are short */
		for (size_t k = i; k > 0 && c->counts[k] > c->counts[k - 1]; k--) {
			double t = c->counts[k]; c->counts[k] = c->counts[k - 1]; c->counts[k - 1] = t;
			char *s = c->names[k]; c->names[k] = c->names[k - 1]; c->names[k - 1] = s;
		}
}

void cg_counts_free(struct cg_counts *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->names[i]);
	free(c->names);
	free(c->counts);
	memset(c, 0, sizeof *c);
}

static struct cg_counts *cg_merged_map_get(struct cg_merged *m, const char *name)
{
	for (size_t i = 0; i < m->n_maps; i++)
		if (strcmp(m->map_names[i], name) == 0)
			return &m->maps[i];
	m->map_names = realloc(m->map_names, (m->n_maps + 1) * sizeof *m->map_names);
	m->maps = realloc(m->maps, (m->n_maps + 1) * sizeof *m->maps);
	if (m->map_names == NULL || m->maps == NULL || (m->map_names[m->n_maps] = strdup(name)) == NULL) {
		fputs("cugraft: out of memory\n", stderr);
		exit(1);
	}
	memset(&m->maps[m->n_maps], 0, sizeof m->maps[0]);
	return &m->maps[m->n_maps++];
}

/* Ratios and the record's own fields are not summed. */
static bool cg_summed(const char *key)
{
	return strcmp(key, "t") != 0 && strcmp(key, "replayed_share") != 0 &&
	       strcmp(key, "patches_per_graph_launch") != 0 && strcmp(key, "pid") != 0 &&
	       strcmp(key, "rank") != 0;
}

void cg_merged_add(struct cg_merged *m, const struct cg_rfile *f)
{
	m->files++;
	const struct jv *s = f->summary;
	if (s == NULL) {
		m->partial++;
		struct cg_counts *fb = cg_merged_map_get(m, "fallbacks");
		for (size_t i = 0; i < f->n_fallbacks; i++) {
			const char *reason = jv_str(jv_get(f->fallbacks[i], "reason"));
			cg_counts_add(fb, reason ? reason : "?", jv_num(jv_get(f->fallbacks[i], "count"), 1));
		}
		return;
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct jv *v = s->items[i];
		const char *key = s->keys[i];
		if (v->type == JV_NUM && cg_summed(key)) {
			cg_counts_add(&m->totals, key, v->num);
		} else if (v->type == JV_OBJ) {
			struct cg_counts *c = cg_merged_map_get(m, key);
			for (size_t k = 0; k < v->n; k++)
				if (v->items[k]->type == JV_NUM)
					cg_counts_add(c, v->keys[k], v->items[k]->num);
		} else if (v->type == JV_ARR && strcmp(key, "kernels") == 0) {
			for (size_t k = 0; k < v->n; k++) {
				const char *name = jv_str(jv_get(v->items[k], "name"));
				if (name)
					cg_counts_add(&m->kernels, name, jv_num(jv_get(v->items[k], "launches"), 0));
			}
		}
	}
}

double cg_merged_total(const struct cg_merged *m, const char *name, double def)
{
	for (size_t i = 0; i < m->totals.n; i++)
		if (strcmp(m->totals.names[i], name) == 0)
			return m->totals.counts[i];
	return def;
}

const struct cg_counts *cg_merged_map(const struct cg_merged *m, const char *name)
{
	for (size_t i = 0; i < m->n_maps; i++)
		if (strcmp(m->map_names[i], name) == 0)
			return &m->maps[i];
	return NULL;
}

static void cg_print_num(FILE *out, double v)
{
	if (v == (double)(long long)v)
		fprintf(out, "%lld", (long long)v);
	else
		fprintf(out, "%.6g", v);
}

void cg_merged_json(FILE *out, const struct cg_merged *m)
{
	fprintf(out, "{\"files\":%zu,\"files_without_summary\":%zu", m->files, m->partial);
	for (size_t i = 0; i < m->totals.n; i++) {
		fputc(',', out);
		jv_print_string(out, m->totals.names[i]);
		fputc(':', out);
		cg_print_num(out, m->totals.counts[i]);
	}
	double ops = cg_merged_total(m, "ops", 0), launches = cg_merged_total(m, "graph_launches", 0);
	if (ops > 0)
		fprintf(out, ",\"replayed_share\":%.6g", cg_merged_total(m, "ops_replayed", 0) / ops);
	if (launches > 0)
		fprintf(out, ",\"patches_per_graph_launch\":%.6g", cg_merged_total(m, "patches", 0) / launches);
	for (size_t i = 0; i < m->n_maps; i++) {
		fputc(',', out);
		jv_print_string(out, m->map_names[i]);
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
	struct cg_counts top = m->kernels;   /* sorted view: sort a copy of the arrays */
	top.names = malloc(top.n * sizeof *top.names + 1);
	top.counts = malloc(top.n * sizeof *top.counts + 1);
	memcpy(top.names, m->kernels.names, top.n * sizeof *top.names);
	memcpy(top.counts, m->kernels.counts, top.n * sizeof *top.counts);
	cg_counts_sort(&top);
	fputs(",\"kernels\":[", out);
	for (size_t k = 0; k < top.n && k < 20; k++) {
		fputs(k ? ",{\"name\":" : "{\"name\":", out);
		jv_print_string(out, top.names[k]);
		fputs(",\"launches\":", out);
		cg_print_num(out, top.counts[k]);
		fputc('}', out);
	}
	fputs("]}\n", out);
	free(top.names);
	free(top.counts);
}

void cg_merged_free(struct cg_merged *m)
{
	cg_counts_free(&m->totals);
	cg_counts_free(&m->kernels);
	for (size_t i = 0; i < m->n_maps; i++) {
		free(m->map_names[i]);
		cg_counts_free(&m->maps[i]);
	}
	free(m->map_names);
	free(m->maps);
}
