/* The JSON Lines report (CUGRAFT_REPORT): opened at the first CUDA use, one write(2) per
 * record so that a killed process leaves valid lines, per-(kind, key) rate limiting, and the
 * exit summary. Processes that never use CUDA write nothing and print nothing. */
#ifndef CG_SHIM_REPORT_H
#define CG_SHIM_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cg_json;

/* Once: expands %p (pid), %r (rank) and %% in CUGRAFT_REPORT and opens it for appending. An
 * unwritable path warns once; the exit summary then goes to stderr. Empty: no file. */
void cg_report_start(void);
/* A report file is open: building records is worth it. */
bool cg_report_active(void);
/* The expanded path ("" before start or when there is none). */
const char *cg_report_path(void);
/* RANK, else OMPI_COMM_WORLD_RANK, else SLURM_PROCID, else 0. */
long cg_report_rank(void);

/* Finishes the record if needed and writes it as one line; thread-safe. A bad record (too long,
 * unbalanced) is dropped with a warning. Does nothing when no file is open. */
void cg_report_emit(struct cg_json *j);

/* Rate limiting: true for the first `limit` calls with this (kind, key); later ones are counted
 * and reported by cg_report_finish as {"event":"suppressed","kind":..,"key":"0x..","count":n}.
 * `kind` is compared by content. When the fixed table is full, calls return false and are
 * counted under kind "other". */
#define CG_REPORT_LIMIT_SLOTS 1024
bool cg_report_first(const char *kind, uint64_t key, unsigned limit);

/* Once (later calls do nothing): emits the suppressed counts, then `summary` (may be NULL);
 * prints a one- or two-line human summary to stderr when CUGRAFT_LOG >= info or the report
 * file is unwritable. Does nothing unless cg_report_start ran. */
void cg_report_finish(struct cg_json *summary);

/* One finished line written as it is, without the lock or any logging: for a fatal-signal
 * handler (a single write(2) appends it whole). */
void cg_report_write_unlocked(const char *line, size_t len);

/* A setting noticed while running (once each): said on stderr and as a report "note" line. */
void cg_note_once(int *once, const char *text);

/* Expands %p, %r, %% of `pattern` into out; -ENAMETOOLONG when it does not fit (unit tests). */
int cg_report_expand(const char *pattern, long pid, long rank, char *out, size_t size);

#endif
