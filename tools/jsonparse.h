/* A small JSON parser for the `cugraft` command (report files are JSON Lines): a value tree,
 * lookups, and compact printing. Allocates freely: it runs in the command, not the shim. */
#ifndef CG_TOOLS_JSONPARSE_H
#define CG_TOOLS_JSONPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum jv_type { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };

struct jv {
	enum jv_type type;
	bool b;
	double num;
	char *str;           /* JV_STR, unescaped, valid UTF-8 (a \u0000 ends it) */
	size_t n;            /* JV_ARR / JV_OBJ members */
	struct jv **items;
	char **keys;         /* JV_OBJ only */
};

/* Parses exactly one value (surrounding blanks allowed). NULL on error, with a message naming
 * the column in err. */
struct jv *jv_parse(const char *text, size_t len, char *err, size_t errlen);
void jv_free(struct jv *v);

struct jv *jv_get(const struct jv *obj, const char *key);   /* NULL if absent or not an object */
double jv_num(const struct jv *v, double def);               /* def unless a number */
const char *jv_str(const struct jv *v);                      /* NULL unless a string */

/* Compact JSON, as parsed; always valid JSON: a number out of double's range as null, bytes
 * that are not UTF-8 as U+FFFD (the parser already replaced those of its strings). */
void jv_print(FILE *out, const struct jv *v);
void jv_print_string(FILE *out, const char *s);
/* The length of the valid UTF-8 sequence at s (before end), 0 when it is not one. */
size_t jv_utf8_len(const char *s, const char *end);

#endif
