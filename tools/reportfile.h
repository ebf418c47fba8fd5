/* Reading cugraft report files (JSON Lines) for the command: the records a file holds, by the
 * process that wrote them, and the merged summary of several processes (ranks). Used by
 * `report`, `profile` and `demo`. */
#ifndef CG_TOOLS_REPORTFILE_H
#define CG_TOOLS_REPORTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "jsonparse.h"

/* One process's records. */
struct cg_rproc {
	const char *path;         /* the file that holds them */
	double pid;               /* of its header or records; -1 when none says */
	struct jv *header;        /* first "header" record, or NULL */
	struct jv *summary;       /* last "summary" record, or NULL (process killed?) */
	const char *mistyped;     /* a summary member that should be a number and is not, or NULL */
	struct jv **fallbacks;    /* every "fallback" record, in order */
	size_t n_fallbacks;
	struct jv **suppressed;
	size_t n_suppressed;
	struct jv **others;       /* the rest, kept so they are freed */
	size_t n_others;
};

/* One report file: the processes that wrote to it (several when they shared one path), in the
 * order of their first record. A header opens a process; a record goes to the last process
 * opened with its pid, or (an older writer put the pid in the header only) to the last one
 * opened. */
struct cg_rfile {
	const char *path;
	struct cg_rproc *procs;
	size_t n_procs;
	size_t records;           /* lines read as records */
	size_t bad_lines;         /* each one reported on stderr as path:line: why */
};

/* Reads a file; false (said on stderr) when it cannot be opened, is a directory, holds a line
 * longer than 64 MiB (CG_RFILE_LINE_MAX) or no record at all. */
bool cg_rfile_load(struct cg_rfile *f, const char *path);
void cg_rfile_free(struct cg_rfile *f);

/* Name -> count, in first-seen order, with a hash index so that adding is O(1) however many
 * distinct names a report holds (a hostile or huge one: 300k kernels). Zero-initialise. */
struct cg_counts {
	size_t n;
	char **names;
	double *counts;
	size_t cap;          /* of names and counts */
	size_t *slots;       /* open addressing: index + 1, 0 empty; n_slots a power of two */
	size_t n_slots;
};
void cg_counts_add(struct cg_counts *c, const char *name, double count);
/* The index of `name`, or c->n when absent. */
size_t cg_counts_find(const struct cg_counts *c, const char *name);
/* Largest first, ties in first-seen order; the index is rebuilt. */
void cg_counts_sort(struct cg_counts *c);
void cg_counts_free(struct cg_counts *c);

/* Summaries added together: every numeric member summed, every object member summed key by
 * key, "kernels" merged by name, "divergence_sites" by site; ratios recomputed. Versions (nccl_version) are taken, not
 * summed: ranks that disagree are listed in `versions`. Processes without a summary add their
 * fallback records instead, one each (counted in `partial`). */
struct cg_merged {
	size_t files, processes, partial;
	const char *mistyped;                     /* the first summary member of the wrong type */
	struct cg_counts totals;                  /* numeric members */
	struct cg_counts along;                   /* a member's count (cg_merged_along), summed over
	                                             the processes that wrote the member */
	struct cg_counts map_names;               /* fallbacks, entry_points, ...: names of maps[] */
	struct cg_counts *maps;
	struct cg_counts kernels;
	struct cg_counts sites;                   /* divergence sites (cg_site_read) -> count */
	struct cg_counts site_first, site_last;   /* -> the first and latest op, where known */
	struct cg_counts version_names;           /* nccl_version, ...: names of versions[] */
	struct cg_counts *versions;               /* per version: value -> files that had it */
};
void cg_merged_add(struct cg_merged *m, const struct cg_rproc *p);
/* Every process of the file, and the file counted. */
void cg_merged_add_file(struct cg_merged *m, const struct cg_rfile *f);

/* A divergence site as `sites` names it: the op the chunk expected (expected_len bytes, not
 * terminated), the op that came instead, at op `at` (from 0) of an `ops`-op chunk. */
struct cg_site {
	unsigned at, ops;
	const char *expected, *got;
	int expected_len;
};
bool cg_site_read(const char *name, struct cg_site *out);
/* The first and the latest op a site diverged at (summed sites: the earliest and the latest of
 * them); false where no summary said. */
bool cg_merged_site_span(const struct cg_merged *m, const char *name, double *first, double *last);
double cg_merged_total(const struct cg_merged *m, const char *name, double def);
/* What a member added up over is counted by: graph_launch_us by graph_launches, patch_us by
 * patches, chunks_launched_8_times by chunks_learned; that count summed over the processes
 * whose summary has the member (a file of an older library has the count, not the member), or
 * `def` where none has it. */
double cg_merged_along(const struct cg_merged *m, const char *name, double def);
const struct cg_counts *cg_merged_map(const struct cg_merged *m, const char *name);
/* A version's values -> files that had it; NULL when no file had it. Each value is a number
 * or a string as cg_version_print writes it (JSON: strings quoted). */
const struct cg_counts *cg_merged_versions(const struct cg_merged *m, const char *name);
void cg_version_print(FILE *out, const char *value, bool json);
/* One JSON object; totals that overflowed to infinity (or NaN) are written as null. */
void cg_merged_json(FILE *out, const struct cg_merged *m);
void cg_merged_free(struct cg_merged *m);

#endif
