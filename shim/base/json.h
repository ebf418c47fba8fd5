/* Builds one JSON Lines record in a fixed buffer, without allocation. Strings are escaped (and
 * invalid UTF-8 replaced); a record that outgrows the buffer or leaves a container open is
 * marked bad and cg_report_emit drops it with a warning: a line is never written truncated.
 * Usage: cg_json_begin(j, "fallback"); cg_json_str(j, "api", name); ...; cg_report_emit(j).
 * Inside arrays pass key NULL (cg_json_obj(j, NULL) opens an object element). */
#ifndef CG_SHIM_JSON_H
#define CG_SHIM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CG_JSON_CAP (16 * 1024)
#define CG_JSON_DEPTH 16

struct cg_json {
	size_t len;
	int depth;            /* open containers below the record object */
	bool bad;             /* overflow or misuse: the line must not be written */
	bool done;            /* cg_json_end ran */
	bool has_member[CG_JSON_DEPTH + 1];   /* per open container: a comma is needed next */
	char buf[CG_JSON_CAP];
};

/* {"event":"<event>","t":<seconds since the library was loaded> */
/* A record buffer off the caller's stack (16 KiB would be too much for a program thread's small
 * stack, or inside a CUPTI callback): one of a few, taken and given back; waits when all are in
 * use, which takes as many threads writing records at once. */
struct cg_json *cg_json_take(void);
void cg_json_give(struct cg_json *j);

/* Opens a record: {"event":EVENT,"t":seconds,"pid":this process, ... */
void cg_json_begin(struct cg_json *j, const char *event);
void cg_json_str(struct cg_json *j, const char *key, const char *val);   /* NULL -> null */
void cg_json_int(struct cg_json *j, const char *key, long long val);
void cg_json_uint(struct cg_json *j, const char *key, uint64_t val);
void cg_json_double(struct cg_json *j, const char *key, double val);     /* NaN/inf -> null */
void cg_json_bool(struct cg_json *j, const char *key, bool val);
void cg_json_hex(struct cg_json *j, const char *key, uint64_t val);      /* "0x1f" (a string) */
void cg_json_null(struct cg_json *j, const char *key);
void cg_json_obj(struct cg_json *j, const char *key);
void cg_json_obj_end(struct cg_json *j);
void cg_json_arr(struct cg_json *j, const char *key);
void cg_json_arr_end(struct cg_json *j);
void cg_json_arr_str(struct cg_json *j, const char *val);
void cg_json_arr_uint(struct cg_json *j, uint64_t val);
/* Closes the record and adds the newline; idempotent. False when the line is bad. */
bool cg_json_end(struct cg_json *j);
/* The finished line (with its newline), or NULL when it is bad or not finished. */
const char *cg_json_line(const struct cg_json *j, size_t *len);

/* Seconds since the library was loaded (the "t" of every record). */
double cg_json_now(void);

#endif
