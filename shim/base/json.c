/* The fixed-buffer JSON record builder. Room for closing every container and the newline is
 * kept in reserve, so cg_json_end can always finish a line that did not overflow. */
#include "json.h"

#include <sched.h>
#include <stdatomic.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "policy/clock.h"

#define CG_JSON_RESERVE (CG_JSON_DEPTH + 2)

static uint64_t cg_json_epoch;

__attribute__((constructor)) static void cg_json_epoch_init(void)
{
	cg_json_epoch = cg_monotonic_ns();
}

double cg_json_now(void)
{
	return (double)(cg_monotonic_ns() - cg_json_epoch) * 1e-9;
}

static void cg_json_put(struct cg_json *j, const char *s, size_t n)
{
	if (j->bad || j->done)
		return;
	if (j->len + n > CG_JSON_CAP - CG_JSON_RESERVE) {
		j->bad = true;
		return;
	}
	memcpy(j->buf + j->len, s, n);
	j->len += n;
}

static void cg_json_putc(struct cg_json *j, char c)
{
	cg_json_put(j, &c, 1);
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not valid. */
static size_t cg_utf8_len(const unsigned char *s)
{
	size_t n;
	unsigned min;
	unsigned cp;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xE0) == 0xC0) { n = 2; cp = s[0] & 0x1F; min = 0x80; }
	else if ((s[0] & 0xF0) == 0xE0) { n = 3; cp = s[0] & 0x0F; min = 0x800; }
	else if ((s[0] & 0xF8) == 0xF0) { n = 4; cp = s[0] & 0x07; min = 0x10000; }
	else return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n;
}

static void cg_json_string(struct cg_json *j, const char *s)
{
	cg_json_putc(j, '"');
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		char esc[8];
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\'; esc[1] = (char)*p;
			cg_json_put(j, esc, 2);
			p++;
		} else if (*p < 0x20) {
			const char *named = *p == '\n' ? "\\n" : *p == '\t' ? "\\t" : *p == '\r' ? "\\r" : NULL;
			if (named)
				cg_json_put(j, named, 2);
			else
				cg_json_put(j, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", *p));
			p++;
		} else {
			size_t n = cg_utf8_len(p);
			if (n == 0) {
				cg_json_put(j, "\\ufffd", 6);
				p++;
			} else {
				cg_json_put(j, (const char *)p, n);
				p += n;
			}
		}
	}
	cg_json_putc(j, '"');
}

/* Comma and "key": for the next member of the innermost container. */
static void cg_json_key(struct cg_json *j, const char *key)
{
	if (j->has_member[j->depth])
		cg_json_putc(j, ',');
	j->has_member[j->depth] = true;
	if (key != NULL) {
		cg_json_string(j, key);
		cg_json_putc(j, ':');
	}
}

void cg_json_begin(struct cg_json *j, const char *event)
{
	j->len = 0;
	j->depth = 0;
	j->bad = false;
	j->done = false;
	j->has_member[0] = false;
	cg_json_putc(j, '{');
	cg_json_str(j, "event", event);
	cg_json_double(j, "t", cg_json_now());
	/* Several processes may append to one report: the reader tells them apart by pid. */
	cg_json_uint(j, "pid", (uint64_t)getpid());
}

void cg_json_str(struct cg_json *j, const char *key, const char *val)
{
	cg_json_key(j, key);
	if (val == NULL)
		cg_json_put(j, "null", 4);
	else
		cg_json_string(j, val);
}

static void cg_json_fmt(struct cg_json *j, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void cg_json_fmt(struct cg_json *j, const char *key, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	cg_json_key(j, key);
	cg_json_put(j, tmp, (size_t)n);
}

void cg_json_int(struct cg_json *j, const char *key, long long val)
{
	cg_json_fmt(j, key, "%lld", val);
}

void cg_json_uint(struct cg_json *j, const char *key, uint64_t val)
{
	cg_json_fmt(j, key, "%llu", (unsigned long long)val);
}

void cg_json_double(struct cg_json *j, const char *key, double val)
{
	if (!isfinite(val))
		cg_json_null(j, key);
	else
		cg_json_fmt(j, key, "%.15g", val);
}

void cg_json_bool(struct cg_json *j, const char *key, bool val)
{
	cg_json_key(j, key);
	cg_json_put(j, val ? "true" : "false", val ? 4 : 5);
}

void cg_json_hex(struct cg_json *j, const char *key, uint64_t val)
{
	cg_json_fmt(j, key, "\"0x%llx\"", (unsigned long long)val);
}

void cg_json_null(struct cg_json *j, const char *key)
{
	cg_json_key(j, key);
	cg_json_put(j, "null", 4);
}

static void cg_json_open(struct cg_json *j, const char *key, char c)
{
	cg_json_key(j, key);
	if (j->depth == CG_JSON_DEPTH) {
		j->bad = true;
		return;
	}
	cg_json_putc(j, c);
	j->has_member[++j->depth] = false;
}

static void cg_json_close(struct cg_json *j, char c)
{
	if (j->depth == 0) {   /* closing more than was opened: the record is malformed */
		j->bad = true;
		return;
	}
	j->depth--;
	/* Closing never fails for lack of room: the reserve holds it. */
	if (!j->bad && !j->done)
		j->buf[j->len++] = c;
}

void cg_json_obj(struct cg_json *j, const char *key) { cg_json_open(j, key, '{'); }
void cg_json_obj_end(struct cg_json *j) { cg_json_close(j, '}'); }
void cg_json_arr(struct cg_json *j, const char *key) { cg_json_open(j, key, '['); }
void cg_json_arr_end(struct cg_json *j) { cg_json_close(j, ']'); }
void cg_json_arr_str(struct cg_json *j, const char *val) { cg_json_str(j, NULL, val); }
void cg_json_arr_uint(struct cg_json *j, uint64_t val) { cg_json_uint(j, NULL, val); }

bool cg_json_end(struct cg_json *j)
{
	if (j->done)
		return !j->bad;
	if (j->depth != 0)   /* a container left open is a bug in the caller: drop the line */
		j->bad = true;
	if (!j->bad) {
		j->buf[j->len++] = '}';
		j->buf[j->len++] = '\n';
	}
	j->done = true;
	return !j->bad;
}

const char *cg_json_line(const struct cg_json *j, size_t *len)
{
	if (!j->done || j->bad)
		return NULL;
	*len = j->len;
	return j->buf;
}

#define CG_JSON_POOL 8
static struct cg_json pool[CG_JSON_POOL];
static atomic_bool pool_busy[CG_JSON_POOL];

struct cg_json *cg_json_take(void)
{
	for (;;) {
		for (int i = 0; i < CG_JSON_POOL; i++)
			if (!atomic_load_explicit(&pool_busy[i], memory_order_relaxed) &&
			    !atomic_exchange_explicit(&pool_busy[i], true, memory_order_acquire))
				return &pool[i];
		sched_yield();
	}
}

void cg_json_give(struct cg_json *j)
{
	atomic_store_explicit(&pool_busy[j - pool], false, memory_order_release);
}
