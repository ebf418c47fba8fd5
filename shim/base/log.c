/* Logging without allocation or re-entry: format into a stack buffer, one write(2) to stderr.
 * Counts of repeated messages live in fixed lock-free tables (first-come slots, never freed). */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Atomic int cg_log_level = CG_LOG_WARN;

/* initial-exec: a preloaded library sits in static TLS, so the guard never goes through
 * __tls_get_addr, which may allocate. */
static __thread bool cg_in_log __attribute__((tls_model("initial-exec")));

#define CG_LOG_SLOTS 512   /* power of two */

struct cg_log_counts {
	_Atomic uintptr_t key[CG_LOG_SLOTS];
	_Atomic unsigned count[CG_LOG_SLOTS];
};
static struct cg_log_counts cg_fmt_counts, cg_once_counts;

void cg_log_set_level(enum cg_log_level level)
{
	atomic_store_explicit(&cg_log_level, level, memory_order_relaxed);
}

bool cg_log_enabled(enum cg_log_level level)
{
	return (int)level <= atomic_load_explicit(&cg_log_level, memory_order_relaxed);
}

/* How many times `key` was seen, this one included; 0 when the table is full. */
static unsigned cg_log_count(struct cg_log_counts *t, uintptr_t key)
{
	if (key == 0)
		key = UINTPTR_MAX;   /* 0 marks an empty slot */
	size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 40);
	for (size_t probe = 0; probe < CG_LOG_SLOTS; probe++) {
		size_t i = (h + probe) & (CG_LOG_SLOTS - 1);
		uintptr_t seen = atomic_load_explicit(&t->key[i], memory_order_acquire);
		if (seen == 0) {
			uintptr_t expect = 0;
			if (atomic_compare_exchange_strong(&t->key[i], &expect, key))
				seen = key;
			else
				seen = expect;
		}
		if (seen == key)
			return atomic_fetch_add(&t->count[i], 1) + 1;
	}
	return 0;
}

ssize_t cg_write_nosigpipe(int fd, const void *buf, size_t len)
{
	sigset_t pipe_only, old, pending;
	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	/* One already pending (the program's own) is left for the program. */
	bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
	ssize_t n = write(fd, buf, len);
	int err = errno;
	if (n < 0 && err == EPIPE && !was_pending) {
		static const struct timespec now = { 0, 0 };
		while (sigtimedwait(&pipe_only, NULL, &now) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return n;
}

static void cg_log_write(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = cg_write_nosigpipe(STDERR_FILENO, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static void cg_log_line(enum cg_log_level level, const char *note, const char *fmt, va_list ap)
{
	static const char *const prefix[] = {
		"cugraft: error: ", "cugraft: warning: ", "cugraft: ", "cugraft: debug: ",
	};
	char buf[CG_LOG_LINE];
	int saved_errno = errno;
	size_t len = (size_t)snprintf(buf, sizeof buf, "%s", prefix[level]);
	int n = vsnprintf(buf + len, sizeof buf - len, fmt, ap);
	if (n > 0)
		len += (size_t)n;
	if (note != NULL && len < sizeof buf)
		len += (size_t)snprintf(buf + len, sizeof buf - len, "%s", note);
	if (len >= sizeof buf - 1) {   /* truncated: mark it, keep room for the newline */
		len = sizeof buf - 1;
		memcpy(buf + len - 3, "...", 3);
	}
	buf[len++] = '\n';
	cg_log_write(buf, len);
	errno = saved_errno;   /* logging from a wrapper must not change what the program sees */
}

void cg_log(enum cg_log_level level, const char *fmt, ...)
{
	if (!cg_log_enabled(level) || cg_in_log)
		return;
	cg_in_log = true;
	const char *note = NULL;
	if (level <= CG_LOG_WARN) {
		unsigned n = cg_log_count(&cg_fmt_counts, (uintptr_t)fmt);
		if (n > CG_LOG_REPEAT_MAX)
			goto out;
		if (n == CG_LOG_REPEAT_MAX)
			note = " (repeated; further ones suppressed)";
	}
	va_list ap;
	va_start(ap, fmt);
	cg_log_line(level, note, fmt, ap);
	va_end(ap);
out:
	cg_in_log = false;
}

void cg_warn_once(uintptr_t key, const char *fmt, ...)
{
	if (!cg_log_enabled(CG_LOG_WARN) || cg_in_log)
		return;
	cg_in_log = true;
	unsigned n = cg_log_count(&cg_once_counts, key);
	if (n == 0)   /* table full: cap by format instead */
		n = cg_log_count(&cg_fmt_counts, (uintptr_t)fmt) > CG_LOG_REPEAT_MAX ? 2 : 1;
	if (n == 1) {
		va_list ap;
		va_start(ap, fmt);
		cg_log_line(CG_LOG_WARN, NULL, fmt, ap);
		va_end(ap);
	}
	cg_in_log = false;
}
