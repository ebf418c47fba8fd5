/* The report writer: the file, the rate limiter and the exit summary. Records are written with
 * one write(2) each under a mutex; what the report may be (file, FIFO, the program's stdout or
 * stderr) and how each is written without blocking or SIGPIPE is below. */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

/* The launcher's rank variable that is set, or NULL; its name in *var. */
static const char *cg_rank_env(const char **var)
{
	static const char *const vars[] = { "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID" };
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *v = getenv(vars[i]);
		if (v != NULL && *v != '\0') {
			*var = vars[i];
			return v;
		}
	}
	return NULL;
}

long cg_report_rank(void)
{
	const char *var, *v = cg_rank_env(&var);
	if (v == NULL)
		return 0;
	char *end;
	errno = 0;
	long rank = strtol(v, &end, 10);
	if (end == v || *end != '\0' || errno != 0 || rank < 0) {
		cg_warn_once((uintptr_t)&cg_report_rank, "%s=%s is not a rank (a number from 0); reported as rank 0",
		             var, v);
		return 0;
	}
	return rank;
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

/* How records reach the report: a regular file takes whole lines (O_APPEND keeps the lines of
 * several processes whole); a stream (FIFO, pipe, terminal) is written non-blocking and a socket
 * sent to without waiting, so that a slow reader costs records, never the program's time, and
 * a reader that is gone costs nothing: no write raises SIGPIPE. */
enum cg_report_kind { CG_REPORT_FILE, CG_REPORT_STREAM, CG_REPORT_SOCKET };
static enum cg_report_kind cg_report_kind;
static atomic_bool cg_report_broken;   /* a write failed: no more records */
static bool cg_report_cut;             /* a record went out in part: the next starts a line */
static bool cg_report_on_stderr;       /* warnings about it would go into the same full pipe */

/* /dev/stdout and /dev/stderr name the program's own streams (they are symbolic links, refused
 * under any other name). A pipe or terminal is opened again through /proc, non-blocking, so
 * that the program's own descriptor keeps its flags; a file is shared (records land where the
 * program's output goes); a socket is shared and sent to with MSG_DONTWAIT. */
static int cg_report_open_std(int std, const char **why)
{
	struct stat st;
	if (fstat(std, &st) != 0) {
		*why = strerror(errno);
		return -1;
	}
	if (S_ISREG(st.st_mode) || S_ISSOCK(st.st_mode)) {
		cg_report_kind = S_ISREG(st.st_mode) ? CG_REPORT_FILE : CG_REPORT_SOCKET;
		int fd = fcntl(std, F_DUPFD_CLOEXEC, 0);
		*why = fd < 0 ? strerror(errno) : NULL;
		return fd;
	}
	if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
		*why = "not a file, pipe, terminal or socket";
		return -1;
	}
	char proc[32];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", std);
	cg_report_kind = CG_REPORT_STREAM;
	int fd = open(proc, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	*why = fd >= 0 ? NULL : errno == ENXIO ? "nobody reads the pipe" : strerror(errno);
	return fd;
}

/* Any other path: a regular file or a FIFO that this user owns, never through a symbolic link
 * nor a second hard link (with %p in a shared directory such as /tmp, a planted link would make
 * the job append to, or create, a file of the attacker's choice). Created 0644 (less the umask). */
static int cg_report_open_path(const char *path, const char **why)
{
	static const char link_why[] = "it is a symbolic link (refused: name the file itself)";
	static const char kind_why[] = "not a regular file or FIFO";
	static char hard_why[96];
	struct stat st;
	/* Refused before opening: opening a device can act (a tape rewinds, a watchdog arms). */
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
		*why = S_ISLNK(st.st_mode) ? link_why : kind_why;
		return -1;
	}
	/* O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking the program's
	 * first CUDA call until one comes; for a regular file it changes nothing. A file this
	 * process creates is its own whoever the file system says owns it (root on NFS). */
	int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
	int fd = open(path, flags | O_CREAT | O_EXCL, 0644);
	bool created = fd >= 0;
	if (fd < 0 && errno == EEXIST)
		fd = open(path, flags);
	if (fd < 0) {
		*why = errno == ELOOP ? link_why : errno == ENXIO ? "a FIFO that nobody reads" : strerror(errno);
		return -1;
	}
	/* Checked on the open file: a link made between lstat and open is caught too. */
	if (fstat(fd, &st) != 0) {
		*why = strerror(errno);
	} else if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
		*why = kind_why;
	} else if (st.st_nlink > 1) {
		snprintf(hard_why, sizeof hard_why,
		         "it has %ju hard links (refused: it could be planted; name a file with one)",
		         (uintmax_t)st.st_nlink);
		*why = hard_why;
	} else {
		*why = !created && st.st_uid != geteuid() ?
		       "it belongs to another user (refused: it could be planted)" : NULL;
	}
	if (*why != NULL) {
		close(fd);
		return -1;
	}
	cg_report_kind = S_ISREG(st.st_mode) ? CG_REPORT_FILE : CG_REPORT_STREAM;
	if (cg_report_kind == CG_REPORT_FILE)
		fcntl(fd, F_SETFL, O_APPEND);   /* a file's writes wait for the disk, as before */
	return fd;
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
	if (strcmp(cg_report_file, "/dev/null") == 0) {   /* asked for no report: none, silently */
		cg_report_file[0] = '\0';
		return;
	}
	const char *why;
	if (strcmp(cg_report_file, "/dev/stdout") == 0)
		cg_report_fd = cg_report_open_std(STDOUT_FILENO, &why);
	else if (strcmp(cg_report_file, "/dev/stderr") == 0)
		cg_report_fd = cg_report_open_std(STDERR_FILENO, &why), cg_report_on_stderr = true;
	else
		cg_report_fd = cg_report_open_path(cg_report_file, &why);
	if (cg_report_fd < 0) {
		cg_log(CG_LOG_WARN, "cannot write the report %s: %s; the summary goes to stderr",
		       cg_report_file, why);
		cg_report_unwritable = true;
	} else if (cg_report_fd <= STDERR_FILENO) {
		/* The program closed a standard stream: its writes there must not land in the report
		 * (nor a later dup2 onto it replace the report). */
		int high = fcntl(cg_report_fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
		if (high >= 0) {
			close(cg_report_fd);
			cg_report_fd = high;
		}
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

enum cg_put { CG_PUT_DONE, CG_PUT_FULL, CG_PUT_FAILED };

/* Writes one record; a stream that is full takes what fits (the rest is dropped, and the next
 * record starts a new line so that only this one reads as cut). Async-signal-safe. */
static enum cg_put cg_report_put(const char *line, size_t len)
{
	if (atomic_load(&cg_report_broken))
		return CG_PUT_FAILED;
	if (cg_report_cut) {
		cg_report_cut = false;
		enum cg_put put = cg_report_put("\n", 1);
		if (put != CG_PUT_DONE) {
			cg_report_cut = put == CG_PUT_FULL;
			return put;
		}
	}
	size_t left = len;
	while (left > 0) {
		ssize_t n = cg_report_kind == CG_REPORT_SOCKET ?
		            send(cg_report_fd, line, left, MSG_DONTWAIT | MSG_NOSIGNAL) :
		            cg_report_kind == CG_REPORT_STREAM ? cg_write_nosigpipe(cg_report_fd, line, left) :
		            write(cg_report_fd, line, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && cg_report_kind != CG_REPORT_FILE) {
			cg_report_cut = left < len;
			return CG_PUT_FULL;
		}
		if (n <= 0) {
			atomic_store(&cg_report_broken, true);
			return CG_PUT_FAILED;
		}
		line += n;
		left -= (size_t)n;
	}
	return CG_PUT_DONE;
}

void cg_report_write_unlocked(const char *line, size_t len)
{
	if (cg_report_fd >= 0)
		cg_report_put(line, len);
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
	int saved_errno = errno;   /* records are written from wrappers: the program's errno stays */
	pthread_mutex_lock(&cg_report_lock);
	bool broken = atomic_load(&cg_report_broken);
	enum cg_put put = cg_report_put(line, len);
	int err = errno;
	if (put == CG_PUT_FAILED && !broken) {
		/* Said once; the exit summary then goes to stderr. */
		cg_report_unwritable = true;
		cg_log(CG_LOG_WARN, "writing the report %s failed: %s; no further records are written",
		       cg_report_file, strerror(err));
	}
	pthread_mutex_unlock(&cg_report_lock);
	if (put == CG_PUT_FULL && !cg_report_on_stderr)
		cg_warn_once((uintptr_t)&cg_report_cut,
		             "the report %s is not read fast enough: records are dropped rather than wait for the reader",
		             cg_report_file);
	errno = saved_errno;
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
	struct cg_json *j = cg_json_take();
	pthread_mutex_lock(&cg_limits_lock);
	for (size_t i = 0; i < CG_REPORT_LIMIT_SLOTS; i++) {
		const struct cg_limit_slot *s = &cg_limits[i];
		if (s->kind == NULL || s->calls <= s->limit)
			continue;
		cg_json_begin(j, "suppressed");
		cg_json_str(j, "kind", s->kind);
		cg_json_hex(j, "key", s->key);
		cg_json_uint(j, "count", s->calls - s->limit);
		cg_report_emit(j);
	}
	if (cg_limits_overflow > 0) {
		cg_json_begin(j, "suppressed");
		cg_json_str(j, "kind", "other");
		cg_json_hex(j, "key", 0);
		cg_json_uint(j, "count", cg_limits_overflow);
		cg_report_emit(j);
	}
	pthread_mutex_unlock(&cg_limits_lock);
	cg_json_give(j);
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
	const char *var;
	if (cg_rank_env(&var) != NULL)
		snprintf(who, sizeof who, "cugraft[rank %ld]: ", cg_report_rank());
	else
		snprintf(who, sizeof who, "cugraft: ");
	double ops = cg_member_num(line, "ops"), replayed = cg_member_num(line, "ops_replayed");
	size_t len = cg_append(buf, 0, sizeof buf,
		"%s%.0f ops, %.0f replayed from %.0f graph launches (%.1f%%), %.0f eager; ~%.1f ms host time saved (estimate)",
		who, ops, replayed, cg_member_num(line, "graph_launches"),
		ops > 0 ? 100.0 * replayed / ops : 0.0, cg_member_num(line, "ops_eager"),
		cg_member_num(line, "host_time_saved_us") / 1000.0);
	if (cg_report_fd >= 0 && atomic_load(&cg_report_broken))
		len = cg_append(buf, len, sizeof buf, "; report: %s (incomplete: a write failed, later records are missing)",
		                cg_report_file);
	else if (cg_report_fd >= 0)
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
	ssize_t rc = cg_write_nosigpipe(STDERR_FILENO, buf, len);
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

void cg_note_once(int *once, const char *text)
{
	if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
		return;
	cg_log(CG_LOG_WARN, "%s", text);
	if (!cg_report_active())
		return;
	struct cg_json *j = cg_json_take();
	cg_json_begin(j, "note");
	cg_json_str(j, "text", text);
	if (cg_json_end(j))
		cg_report_emit(j);
	cg_json_give(j);
}
