/* Host backtraces for report records: captured with libunwind (no malloc), symbolised with
 * dladdr only when a record is written. Without libunwind the capture returns 0 frames. */
#ifndef CG_SHIM_BACKTRACE_H
#define CG_SHIM_BACKTRACE_H

struct cg_json;

/* Fills pcs with up to max return addresses of the program's stack from the call into cugraft
 * outwards: the shim's own frames come off but the entry point the program called. Where the
 * whole stack is one object (the shim linked into a test program), the caller's `skip`
 * innermost frames come off instead (cg_backtrace_capture itself is never included). Returns
 * the count. */
int cg_backtrace_capture(void **pcs, int max, int skip);

/* "key":["function+0xoff (library)", ...]; frames without a symbol read "?? (library+0xoff)",
 * the module offset addr2line wants. No file:line: that needs DWARF or an addr2line process. */
void cg_json_backtrace(struct cg_json *j, const char *key, void *const *pcs, int n);

/* "key":["/full/path/of/object+0xOFFSET", ...], one per frame of cg_json_backtrace: what
 * `addr2line -e PATH 0xOFFSET` wants, so `cugraft report` can add file:line where the object has
 * debug information (nothing is spent on it in the job). "" for a frame outside any object. */
void cg_json_backtrace_where(struct cg_json *j, const char *key, void *const *pcs, int n);

#endif
