/* Host backtraces for report records: captured with libunwind (no malloc), symbolised with
 * dladdr only when a record is written. Without libunwind the capture returns 0 frames. */
#ifndef CG_SHIM_BACKTRACE_H
#define CG_SHIM_BACKTRACE_H

struct cg_json;

/* Fills pcs with up to max return addresses of the caller's stack, dropping the caller's own
 * `skip` innermost frames (cg_backtrace_capture itself is never included). Returns the count. */
int cg_backtrace_capture(void **pcs, int max, int skip);

/* "key":["function+0xoff (library)", ...]; frames without a symbol read "?? (library+0xoff)",
 * the module offset addr2line wants. No file:line: that needs DWARF or an addr2line process. */
void cg_json_backtrace(struct cg_json *j, const char *key, void *const *pcs, int n);

#endif
