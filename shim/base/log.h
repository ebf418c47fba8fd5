/* Logging to stderr for the preloaded library: never allocates (fixed stack buffer), never
 * re-enters (thread-local guard), one write(2) per line prefixed "cugraft: ", filtered by
 * CUGRAFT_LOG (warn until the options are parsed), and repeated messages are capped. */
#ifndef CG_SHIM_LOG_H
#define CG_SHIM_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum cg_log_level { CG_LOG_ERROR, CG_LOG_WARN, CG_LOG_INFO, CG_LOG_DEBUG };

/* Longest line written; longer ones end in "...". */
#define CG_LOG_LINE 1024
/* Each format string at WARN or ERROR prints at most this many times; the last one says that
 * further ones are suppressed. INFO and DEBUG are not capped (asked for explicitly). */
#define CG_LOG_REPEAT_MAX 10

void cg_log_set_level(enum cg_log_level level);
bool cg_log_enabled(enum cg_log_level level);

void cg_log(enum cg_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A warning printed once per key: any stable pointer or id that names the cause (a CUfunction,
 * the address of a static, an enum value). Keys are remembered in a fixed table; when it is
 * full, messages fall back to the per-format cap above. */
void cg_warn_once(uintptr_t key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* write(2) that never raises SIGPIPE (a pipe whose reader is gone, `2>&1 | head` fails with
 * EPIPE instead of killing the program): SIGPIPE is blocked in the calling thread for the call
 * and one it raised is taken back. Async-signal-safe; errno as write(2) leaves it. */
ssize_t cg_write_nosigpipe(int fd, const void *buf, size_t len);

#endif
