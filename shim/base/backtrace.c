/* Backtrace capture and symbolisation for the report. Symbols come from the dynamic symbol
 * table (dladdr): static functions and executables linked without -rdynamic show as "??". */
#define _GNU_SOURCE
#include "backtrace.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "json.h"

/* Under ThreadSanitizer, libunwind's local unwinder now and then dies with SIGSEGV walking
 * through the sanitizer's interceptors; glibc's backtrace() (libgcc's unwinder) does not. */
#if defined(CG_HAVE_LIBUNWIND) && defined(__SANITIZE_THREAD__)
#undef CG_HAVE_LIBUNWIND
#define CG_GLIBC_BACKTRACE 1
#include <execinfo.h>
#endif
#ifdef CG_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#define CG_BACKTRACE_MAX 64
#define CG_OWN_FRAMES_MAX 16 /* the shim's deepest path to a record is about 10 frames */

#if defined(CG_HAVE_LIBUNWIND) || defined(CG_GLIBC_BACKTRACE)
/* Whether pc (a return address) lies in the object at `base`. */
static bool in_object(void *pc, const void *base)
{
	Dl_info info;
	return dladdr((void *)((uintptr_t)pc - 1), &info) != 0 && info.dli_fbase == base;
}

/* How many frames of all[first..n) cugraft itself added: its innermost ones in its own object,
 * all but the outermost of them, the entry point the program called. A record is written deep
 * inside the shim (a boundary that ends a learning chunk, a flush), and the depth the user asks
 * for is the program's. -1 where that cannot be told: every frame in one object (the shim linked
 * into a test program), or the innermost frame not in the shim's. */
static int own_frames(void *const *all, int first, int n)
{
	Dl_info self;
	if (dladdr((void *)(uintptr_t)cg_backtrace_capture, &self) == 0)
		return -1;
	int k = first;
	while (k < n && in_object(all[k], self.dli_fbase))
		k++;
	return k == first || k == n ? -1 : k - 1 - first;
}
#endif

__attribute__((noinline)) int cg_backtrace_capture(void **pcs, int max, int skip)
{
#if defined(CG_HAVE_LIBUNWIND) || defined(CG_GLIBC_BACKTRACE)
	void *all[CG_BACKTRACE_MAX + 1];
	if (max <= 0 || skip < 0)
		return 0;
	/* room for the frames below our return address and for the shim's own (own_frames) */
	int want = max + skip + 4 + CG_OWN_FRAMES_MAX;
	if (want > CG_BACKTRACE_MAX + 1)
		want = CG_BACKTRACE_MAX + 1;
#ifdef CG_GLIBC_BACKTRACE
	int n = backtrace(all, want);
#else
	int n = unw_backtrace(all, want);
#endif
	/* The frames above ours start at our return address: all[0] is this function with
	 * libunwind, and with glibc's backtrace() under a sanitizer its interceptor may come
	 * first. */
	void *ret = __builtin_return_address(0);
	int first = 0;
	while (first < n && all[first] != ret)
		first++;
	if (first == n)
		first = 1;
	int own = own_frames(all, first, n);
	first += own >= 0 ? own : skip;
	if (n <= first)
		return 0;
	n -= first;
	if (n > max)
		n = max;
	memcpy(pcs, all + first, (size_t)n * sizeof pcs[0]);
	return n;
#else
	(void)pcs; (void)max; (void)skip;
	return 0;
#endif
}

void cg_json_backtrace(struct cg_json *j, const char *key, void *const *pcs, int n)
{
	cg_json_arr(j, key);
	for (int i = 0; i < n; i++) {
		char frame[512];
		Dl_info info;
		/* A return address points after the call; pc-1 stays inside the calling function. */
		uintptr_t pc = (uintptr_t)pcs[i] - 1;
		if (dladdr((void *)pc, &info) == 0 || info.dli_fname == NULL) {
			snprintf(frame, sizeof frame, "?? (0x%llx)", (unsigned long long)pc);
		} else {
			const char *slash = strrchr(info.dli_fname, '/');
			const char *lib = slash ? slash + 1 : info.dli_fname;
			if (info.dli_sname != NULL)
				snprintf(frame, sizeof frame, "%s+0x%llx (%s)", info.dli_sname,
				         (unsigned long long)(pc - (uintptr_t)info.dli_saddr), lib);
			else
				snprintf(frame, sizeof frame, "?? (%s+0x%llx)", lib,
				         (unsigned long long)(pc - (uintptr_t)info.dli_fbase));
		}
		cg_json_arr_str(j, frame);
	}
	cg_json_arr_end(j);
}

/* The main program's own path: dladdr may give it as run (argv[0]), not as a file to open. */
static const char *self_exe(void)
{
	static char path[PATH_MAX];
	static int done;
	if (!done) {
		ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
		path[n > 0 ? n : 0] = '\0';
		done = 1;
	}
	return path[0] ? path : NULL;
}

void cg_json_backtrace_where(struct cg_json *j, const char *key, void *const *pcs, int n)
{
	cg_json_arr(j, key);
	for (int i = 0; i < n; i++) {
		char where[PATH_MAX + 32];
		Dl_info info;
		uintptr_t pc = (uintptr_t)pcs[i] - 1;
		if (dladdr((void *)pc, &info) == 0 || info.dli_fname == NULL) {
			cg_json_arr_str(j, "");
			continue;
		}
		const char *file = strchr(info.dli_fname, '/') ? info.dli_fname : self_exe();
		snprintf(where, sizeof where, "%s+0x%llx", file ? file : info.dli_fname,
		         (unsigned long long)(pc - (uintptr_t)info.dli_fbase));
		cg_json_arr_str(j, where);
	}
	cg_json_arr_end(j);
}
