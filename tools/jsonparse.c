/* Recursive-descent JSON parser (RFC 8259) with a nesting limit, for reading report lines. */
#include "jsonparse.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define JV_MAX_DEPTH 64

struct jv_parser {
	const char *p, *start, *end;
	const char *err;
	int depth;
};

static void *jv_alloc(size_t n)
{
	void *p = calloc(1, n);
	if (p == NULL) {
		fputs("cugraft: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

static void *jv_grow(void *p, size_t n)
{
	p = realloc(p, n);
	if (p == NULL) {
		fputs("cugraft: out of memory\n", stderr);
		exit(1);
	}
	return p;
}

static void jv_blank(struct jv_parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static struct jv *jv_fail(struct jv_parser *ps, const char *why, struct jv *partial)
{
	if (ps->err == NULL)
		ps->err = why;
	jv_free(partial);
	return NULL;
}

static struct jv *jv_value(struct jv_parser *ps);

static void jv_utf8(char **out, unsigned cp)
{
	unsigned char *o = (unsigned char *)*out;
	if (cp < 0x80) { *o++ = (unsigned char)cp; }
	else if (cp < 0x800) { *o++ = 0xC0 | (cp >> 6); *o++ = 0x80 | (cp & 0x3F); }
	else if (cp < 0x10000) { *o++ = 0xE0 | (cp >> 12); *o++ = 0x80 | ((cp >> 6) & 0x3F); *o++ = 0x80 | (cp & 0x3F); }
	else { *o++ = 0xF0 | (cp >> 18); *o++ = 0x80 | ((cp >> 12) & 0x3F); *o++ = 0x80 | ((cp >> 6) & 0x3F); *o++ = 0x80 | (cp & 0x3F); }
	*out = (char *)o;
}

static int jv_hex4(const char *p, unsigned *cp)
{
	*cp = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
		        c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		*cp = *cp * 16 + (unsigned)d;
	}
	return 0;
}

size_t jv_utf8_len(const char *s, const char *end)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t avail = (size_t)(end - s);
	if (avail == 0)
		return 0;
	if (p[0] < 0x80)
		return 1;
	size_t n = p[0] >= 0xC2 && p[0] <= 0xDF ? 2 : p[0] >= 0xE0 && p[0] <= 0xEF ? 3 :
	           p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : 0;
	if (n == 0 || avail < n)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xC0) != 0x80)
			return 0;
	/* overlong forms, UTF-16 surrogates, beyond U+10FFFF */
	if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0) ||
	    (p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90))
		return 0;
	return n;
}

/* A string at ps->p (on the quote); returns the unescaped copy, each byte that is not part of
 * valid UTF-8 replaced by U+FFFD (a report names kernels as the program gave them, and what we
 * print must be valid JSON). */
static char *jv_string(struct jv_parser *ps)
{
	const char *p = ++ps->p;
	const char *close = p;
	while (close < ps->end && *close != '"')
		close += *close == '\\' ? 2 : 1;
	if (close >= ps->end) {
		ps->err = "unterminated string";
		return NULL;
	}
	/* Unescaping never lengthens; a replaced byte grows to 3. */
	char *s = jv_alloc(3 * (size_t)(close - p) + 1), *o = s;
	while (p < close) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20) {
			ps->p = p;
			ps->err = "control character in string";
			free(s);
			return NULL;
		}
		if (c >= 0x80) {
			size_t n = jv_utf8_len(p, close);
			if (n == 0) {
				jv_utf8(&o, 0xFFFD);
				p++;
			} else {
				memcpy(o, p, n);
				o += n;
				p += n;
			}
			continue;
		}
		if (c != '\\') {
			*o++ = *p++;
			continue;
		}
		p++;
		switch (*p++) {
		case '"': *o++ = '"'; break;
		case '\\': *o++ = '\\'; break;
		case '/': *o++ = '/'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u': {
			unsigned cp, lo;
			if (close - p < 4 || jv_hex4(p, &cp) != 0)
				goto bad_escape;
			p += 4;
			if (cp >= 0xD800 && cp < 0xDC00 && close - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
			    jv_hex4(p + 2, &lo) == 0 && lo >= 0xDC00 && lo < 0xE000) {
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
				p += 6;
			} else if (cp >= 0xD800 && cp < 0xE000) {
				cp = 0xFFFD;
			}
			jv_utf8(&o, cp);
			break;
		}
		default:
			goto bad_escape;
		}
	}
	*o = '\0';
	ps->p = close + 1;
	return s;
bad_escape:
	ps->p = p - 1;
	ps->err = "bad escape in string";
	free(s);
	return NULL;
}

static struct jv *jv_number(struct jv_parser *ps)
{
	const char *p = ps->p;
	if (*p == '-')
		p++;
	if (p >= ps->end || *p < '0' || *p > '9')
		return jv_fail(ps, "bad number", NULL);
	if (*p == '0')
		p++;
	else
		while (p < ps->end && *p >= '0' && *p <= '9') p++;
	if (p < ps->end && *p == '.') {
		p++;
		if (p >= ps->end || *p < '0' || *p > '9')
			return jv_fail(ps, "bad number", NULL);
		while (p < ps->end && *p >= '0' && *p <= '9') p++;
	}
	if (p < ps->end && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < ps->end && (*p == '+' || *p == '-'))
			p++;
		if (p >= ps->end || *p < '0' || *p > '9')
			return jv_fail(ps, "bad number", NULL);
		while (p < ps->end && *p >= '0' && *p <= '9') p++;
	}
	char buf[64];
	size_t n = (size_t)(p - ps->p);
	if (n >= sizeof buf)
		return jv_fail(ps, "number too long", NULL);
	memcpy(buf, ps->p, n);
	buf[n] = '\0';
	struct jv *v = jv_alloc(sizeof *v);
	v->type = JV_NUM;
	v->num = strtod(buf, NULL);
	ps->p = p;
	return v;
}

static struct jv *jv_container(struct jv_parser *ps, bool object)
{
	char close = object ? '}' : ']';
	struct jv *v = jv_alloc(sizeof *v);
	v->type = object ? JV_OBJ : JV_ARR;
	if (++ps->depth > JV_MAX_DEPTH)
		return jv_fail(ps, "nested too deeply", v);
	ps->p++;
	jv_blank(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		ps->depth--;
		return v;
	}
	while (true) {
		char *key = NULL;
		jv_blank(ps);
		if (object) {
			if (ps->p >= ps->end || *ps->p != '"')
				return jv_fail(ps, ps->p >= ps->end ? "line ends inside an object" : "expected a key", v);
			if ((key = jv_string(ps)) == NULL)
				return jv_fail(ps, NULL, v);
			jv_blank(ps);
			if (ps->p >= ps->end || *ps->p != ':') {
				free(key);
				return jv_fail(ps, "expected ':'", v);
			}
			ps->p++;
		}
		struct jv *item = jv_value(ps);
		if (item == NULL) {
			free(key);
			return jv_fail(ps, NULL, v);
		}
		if ((v->n & (v->n - 1)) == 0) {   /* 0, 1, 2, 4, ... members: double */
			size_t cap = v->n ? 2 * v->n : 1;
			v->items = jv_grow(v->items, cap * sizeof *v->items);
			if (object)
				v->keys = jv_grow(v->keys, cap * sizeof *v->keys);
		}
		if (object)
			v->keys[v->n] = key;
		v->items[v->n++] = item;
		jv_blank(ps);
		if (ps->p >= ps->end)
			return jv_fail(ps, object ? "line ends inside an object" : "line ends inside an array", v);
		if (*ps->p == close) {
			ps->p++;
			ps->depth--;
			return v;
		}
		if (*ps->p != ',')
			return jv_fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'", v);
		ps->p++;
	}
}

static struct jv *jv_word(struct jv_parser *ps, const char *word, enum jv_type type, bool b)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return jv_fail(ps, "unexpected character", NULL);
	ps->p += n;
	struct jv *v = jv_alloc(sizeof *v);
	v->type = type;
	v->b = b;
	return v;
}

static struct jv *jv_value(struct jv_parser *ps)
{
	jv_blank(ps);
	if (ps->p >= ps->end)
		return jv_fail(ps, "line ends where a value should be", NULL);
	switch (*ps->p) {
	case '{': return jv_container(ps, true);
	case '[': return jv_container(ps, false);
	case '"': {
		char *s = jv_string(ps);
		if (s == NULL)
			return NULL;
		struct jv *v = jv_alloc(sizeof *v);
		v->type = JV_STR;
		v->str = s;
		return v;
	}
	case 't': return jv_word(ps, "true", JV_BOOL, true);
	case 'f': return jv_word(ps, "false", JV_BOOL, false);
	case 'n': return jv_word(ps, "null", JV_NULL, false);
	default: return jv_number(ps);
	}
}

struct jv *jv_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct jv_parser ps = { .p = text, .start = text, .end = text + len };
	struct jv *v = jv_value(&ps);
	if (v != NULL) {
		jv_blank(&ps);
		if (ps.p < ps.end) {
			jv_free(v);
			v = jv_fail(&ps, "text after the value", NULL);
		}
	}
	if (v == NULL && err != NULL)
		snprintf(err, errlen, "%s at column %zu", ps.err ? ps.err : "invalid JSON",
		         (size_t)(ps.p - ps.start) + 1);
	return v;
}

void jv_free(struct jv *v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < v->n; i++) {
		jv_free(v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
	free(v);
}

struct jv *jv_get(const struct jv *obj, const char *key)
{
	if (obj == NULL || obj->type != JV_OBJ)
		return NULL;
	for (size_t i = 0; i < obj->n; i++)
		if (strcmp(obj->keys[i], key) == 0)
			return obj->items[i];
	return NULL;
}

double jv_num(const struct jv *v, double def)
{
	return v != NULL && v->type == JV_NUM ? v->num : def;
}

const char *jv_str(const struct jv *v)
{
	return v != NULL && v->type == JV_STR ? v->str : NULL;
}

void jv_print_string(FILE *out, const char *s)
{
	fputc('"', out);
	const char *end = s + strlen(s);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", out);
		else if (*p < 0x20 || *p == 0x7F)
			fprintf(out, "\\u%04x", *p);
		else if (*p < 0x80)
			fputc(*p, out);
		else {
			size_t n = jv_utf8_len((const char *)p, end);
			if (n == 0)
				fputs("\\ufffd", out);
			else
				fwrite(p, 1, n, out), p += n - 1;
		}
	}
	fputc('"', out);
}

void jv_print(FILE *out, const struct jv *v)
{
	switch (v->type) {
	case JV_NULL: fputs("null", out); break;
	case JV_BOOL: fputs(v->b ? "true" : "false", out); break;
	case JV_NUM:
		if (!isfinite(v->num))   /* a number beyond double's range (1e999) */
			fputs("null", out);
		else if (v->num == floor(v->num) && fabs(v->num) < 9007199254740992.0)
			fprintf(out, "%.0f", v->num);
		else
			fprintf(out, "%.15g", v->num);
		break;
	case JV_STR: jv_print_string(out, v->str); break;
	case JV_ARR:
	case JV_OBJ:
		fputc(v->type == JV_OBJ ? '{' : '[', out);
		for (size_t i = 0; i < v->n; i++) {
			if (i > 0)
				fputc(',', out);
			if (v->type == JV_OBJ) {
				jv_print_string(out, v->keys[i]);
				fputc(':', out);
			}
			jv_print(out, v->items[i]);
		}
		fputc(v->type == JV_OBJ ? '}' : ']', out);
		break;
	}
}
