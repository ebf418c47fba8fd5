/* The report writer: the file, the rate limiter and the exit summary. Records are written with
 * one write(2) each under a mutex (O_APPEND keeps the lines of several processes whole). */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "options.h"

static pthread_once_t cg_report_once = PTHREAD_ONCE_INIT;
static atomic_bool cg_report_started, cg_report_finished;
static int cg_report_fd = -1;
static bool cg_report_unwritable;
static char cg_report_file[4096];
static pthread_mutex_t cg_report_lock = PTHREAD_MUTEX_INITIALIZER;

struct cg_limit_slot {
	const char *kind;            /* NULL: free */
	uint64_t key;
	unsigned limit;
	unsigned long long calls;
};
static struct cg_limit_slot cg_limits[CG_REPORT_LIMIT_SLOTS];
static unsigned long long cg_limits_overflow;
static pthread_mutex_t cg_limits_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *cg_rank_env(void)
{
	static const char *const vars[] = { "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID" };
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *v = getenv(vars[i]);
		if (v != NULL && *v != '\0')
			return v;
	}
	return NULL;
}

long cg_report_rank(void)
{
	const char *v = cg_rank_env();
	return v ? strtol(v, NULL, 10) : 0;
}

int cg_report_expand(const char *pattern, long pid, long rank, char *out, size_t size)
{
	size_t len = 0;
	for (const char *p = pattern; *p; p++) {
		char num[24];
		const char *piece = num;
		if (*p == '%' && p[1] == 'p')
			snprintf(num, sizeof num, "%ld", pid), p++;
		else if (*p == '%' && p[1] == 'r')
			snprintf(num, sizeof num, "%ld", rank), p++;
		else if (*p == '%' && p[1] == '%')
			piece = "%", p++;
		else
			num[0] = *p, num[1] = '\0';
		size_t n = strlen(piece);
		if (len + n >= size)
			return -ENAMETOOLONG;
		memcpy(out + len, piece, n);
		len += n;
	}
	out[len] = '\0';
	return 0;
}

static void cg_report_open(void)
{
	const char *pattern = cg_opt_str(CG_OPT_REPORT);
	atomic_store(&cg_report_started, true);
	if (pattern[0] == '\0')
		return;
	if (cg_report_expand(pattern, (long)getpid(), cg_report_rank(), cg_report_file,
	                     sizeof cg_report_file) != 0) {
		cg_log(CG_LOG_WARN, "CUGRAFT_REPORT=%s expands to a path that is too long; the summary goes to stderr", pattern);
		cg_report_file[0] = '\0';
		cg_report_unwritable = true;
		return;
	}
	cg_report_fd = open(cg_report_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (cg_report_fd < 0) {
		cg_log(CG_LOG_WARN, "cannot write the report %s: %s; the summary goes to stderr",
		       cg_report_file, strerror(errno));
		cg_report_unwritable = true;
	}
}

void cg_report_start(void)
{
	pthread_once(&cg_report_once, cg_report_open);
}

bool cg_report_active(void)
{
	return cg_report_fd >= 0;
}

const char *cg_report_path(void)
{
	return cg_report_fd >= 0 ? cg_report_file : "";
}

void cg_report_write_unlocked(const char *line, size_t len)
{
	while (cg_report_fd >= 0 && len > 0) {
		ssize_t n = write(cg_report_fd, line, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		line += n;
		len -= (size_t)n;
	}
}

void cg_report_emit(struct cg_json *j)
{
	if (cg_report_fd < 0)
		return;
	size_t len;
	const char *line = cg_json_end(j) ? cg_json_line(j, &len) : NULL;
	if (line == NULL) {
		cg_log(CG_LOG_WARN, "report record dropped: longer than %d bytes or malformed", CG_JSON_CAP);
		return;
	}
	pthread_mutex_lock(&cg_report_lock);
	while (len > 0) {
		ssize_t n = write(cg_report_fd, line, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			cg_log(CG_LOG_WARN, "writing the report %s failed: %s", cg_report_file, strerror(errno));
			break;
		}
		line += n;
		len -= (size_t)n;
	}
	pthread_mutex_unlock(&cg_report_lock);
}

static size_t cg_limit_hash(const char *kind, uint64_t key)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = kind; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	h ^= key * 0x9E3779B97F4A7C15ull;
	return (size_t)(h ^ (h >> 29));
}

bool cg_report_first(const char *kind, uint64_t key, unsigned limit)
{
	bool first = false;
	size_t h = cg_limit_hash(kind, key);
	pthread_mutex_lock(&cg_limits_lock);
	size_t probe;
	for (probe = 0; probe < CG_REPORT_LIMIT_SLOTS; probe++) {
		struct cg_limit_slot *s = &cg_limits[(h + probe) % CG_REPORT_LIMIT_SLOTS];
		if (s->kind == NULL) {
			s->kind = kind;
			s->key = key;
			s->limit = limit;
		} else if (s->key != key || strcmp(s->kind, kind) != 0) {
			continue;
		}
		first = ++s->calls <= s->limit;
		break;
	}
	if (probe == CG_REPORT_LIMIT_SLOTS)
		cg_limits_overflow++;
	pthread_mutex_unlock(&cg_limits_lock);
	return first;
}

static void cg_report_suppressed(void)
{
	struct cg_json j;
	pthread_mutex_lock(&cg_limits_lock);
	for (size_t i = 0; i < CG_REPORT_LIMIT_SLOTS; i++) {
		const struct cg_limit_slot *s = &cg_limits[i];
		if (s->kind == NULL || s->calls <= s->limit)
			continue;
		cg_json_begin(&j, "suppressed");
		cg_json_str(&j, "kind", s->kind);
		cg_json_hex(&j, "key", s->key);
		cg_json_uint(&j, "count", s->calls - s->limit);
		cg_report_emit(&j);
	}
	if (cg_limits_overflow > 0) {
		cg_json_begin(&j, "suppressed");
		cg_json_str(&j, "kind", "other");
		cg_json_hex(&j, "key", 0);
		cg_json_uint(&j, "count", cg_limits_overflow);
		cg_report_emit(&j);
	}
	pthread_mutex_unlock(&cg_limits_lock);
}

/* Minimal reading of our own summary line (no blanks, keys without escapes) for the human
 * summary: skips one value, finds a member of the object starting at `obj`. */
static const char *cg_skip_value(const char *p)
{
	int depth = 0;
	bool in_str = false;
	for (; *p; p++) {
		if (in_str) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"' && (in_str = false, depth == 0))
				return p + 1;
			continue;
		}
		switch (*p) {
		case '"': in_str = true; break;
		case '{': case '[': depth++; break;
		case '}': case ']':
			if (depth == 0)
				return p;
			if (--depth == 0)
				return p + 1;
			break;
		case ',': if (depth == 0) return p; break;
		}
	}
	return p;
}

/* The value of member `key` of the object at obj, or NULL. */
static const char *cg_find_member(const char *obj, const char *key)
{
	size_t klen = strlen(key);
	const char *p = obj + 1;
	while (*p == '"') {
		const char *k = p + 1, *kend = cg_skip_value(p) - 1;
		if (*kend != '"' || kend[1] != ':')
			return NULL;
		p = kend + 2;
		if ((size_t)(kend - k) == klen && memcmp(k, key, klen) == 0)
			return p;
		p = cg_skip_value(p);
		if (*p != ',')
			return NULL;
		p++;
	}
	return NULL;
}

static double cg_member_num(const char *obj, const char *key)
{
	const char *v = cg_find_member(obj, key);
	return v ? strtod(v, NULL) : 0;
}

static size_t cg_append(char *buf, size_t len, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static size_t cg_append(char *buf, size_t len, size_t size, const char *fmt, ...)
{
	if (len >= size)
		return len;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
	return n < 0 ? len : len + (size_t)n >= size ? size - 1 : len + (size_t)n;
}

static void cg_report_human(const char *line)
{
	char buf[1024], who[48];
	if (cg_rank_env() != NULL)
		snprintf(who, sizeof who, "cugraft[rank %ld]: ", cg_report_rank());
	else
		snprintf(who, sizeof who, "cugraft: ");
	double ops = cg_member_num(line, "ops"), replayed = cg_member_num(line, "ops_replayed");
	size_t len = cg_append(buf, 0, sizeof buf,
		"%s%.0f ops, %.0f replayed from %.0f graph launches (%.1f%%), %.0f eager; ~%.1f ms host time saved (estimate)",
		who, ops, replayed, cg_member_num(line, "graph_launches"),
		ops > 0 ? 100.0 * replayed / ops : 0.0, cg_member_num(line, "ops_eager"),
		cg_member_num(line, "host_time_saved_us") / 1000.0);
	if (cg_report_fd >= 0)
		len = cg_append(buf, len, sizeof buf, "; report: %s", cg_report_file);
	len = cg_append(buf, len, sizeof buf, "\n");
	const char *fb = cg_find_member(line, "fallbacks");
	if (fb != NULL && fb[0] == '{' && fb[1] == '"') {
		len = cg_append(buf, len, sizeof buf, "%sfallbacks:", who);
		for (const char *p = fb + 1; *p == '"'; ) {
			const char *kend = cg_skip_value(p) - 1;
			len = cg_append(buf, len, sizeof buf, " %.*s %.0f", (int)(kend - p - 1), p + 1,
			                strtod(kend + 2, NULL));
			p = cg_skip_value(kend + 2);
			if (*p != ',')
				break;
			p++;
		}
		len = cg_append(buf, len, sizeof buf, "\n");
	}
	ssize_t rc = write(STDERR_FILENO, buf, len);
	(void)rc;   /* nothing useful to do at exit if stderr is gone */
}

void cg_report_finish(struct cg_json *summary)
{
	if (!atomic_load(&cg_report_started) || atomic_exchange(&cg_report_finished, true))
		return;
	cg_report_suppressed();
	if (summary == NULL)
		return;
	cg_report_emit(summary);
	size_t len;
	const char *line = cg_json_end(summary) ? cg_json_line(summary, &len) : NULL;
	if (line != NULL && (cg_log_enabled(CG_LOG_INFO) || cg_report_unwritable))
		cg_report_human(line);
}
