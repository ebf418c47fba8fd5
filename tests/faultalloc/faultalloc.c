/* libfaultalloc.so: preloaded after libcugraft.so, fails the n-th malloc/calloc/realloc called
 * directly from libcugraft.so's code (FAULTALLOC_N=n; FAULTALLOC_FROM=1: that one and every later
 * one) and passes every other allocation to the next allocator. FAULTALLOC_STATS=path: at exit,
 * each process appends how many allocations came from libcugraft.so and how many failed.
 * Slow start-ups, to open the windows other threads may hit: FAULTALLOC_DELAY_MS=ms makes the
 * n-th allocation wait that long instead of failing (the 1st is the policy engine's), and
 * FAULTALLOC_DLOPEN_DELAY_MS=ms makes libcugraft.so's first dlopen of libcuda.so.1 wait. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);

/* dlsym may calloc (its error buffer) before the real functions are known: such early
 * allocations come from here and are never freed to the real allocator. */
static _Alignas(max_align_t) char early[4096];
static atomic_size_t early_used;

static bool is_early(const void *p)
{
	return (const char *)p >= early && (const char *)p < early + sizeof(early);
}

static void *early_alloc(size_t n)
{
	n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	size_t at = atomic_fetch_add(&early_used, n);
	return at + n <= sizeof(early) ? early + at : NULL;
}

/* initial-exec: a dynamic TLS access may itself allocate */
static __thread bool resolving __attribute__((tls_model("initial-exec")));

static bool resolve(void)
{
	if (real_free)
		return true;
	if (resolving)
		return false;
	resolving = true;
	real_malloc = dlsym(RTLD_NEXT, "malloc");
	real_calloc = dlsym(RTLD_NEXT, "calloc");
	real_realloc = dlsym(RTLD_NEXT, "realloc");
	real_free = dlsym(RTLD_NEXT, "free");
	resolving = false;
	return real_free != NULL;
}

/* libcugraft.so's mapped range, looked up until it is found (it is mapped before any of its
 * code runs, so an allocation from it always finds it). */
static _Atomic uintptr_t lib_lo, lib_hi;

static int find_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libcugraft.so"))
		return 0;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < lo)
			lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
			hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	atomic_store(&lib_lo, lo); /* before lib_hi, which says the range is known */
	atomic_store(&lib_hi, hi);
	return 1;
}

static bool from_lib(const void *caller)
{
	if (!atomic_load(&lib_hi) && !resolving) {
		resolving = true;
		dl_iterate_phdr(find_lib, NULL);
		resolving = false;
	}
	uintptr_t pc = (uintptr_t)caller;
	return pc >= atomic_load(&lib_lo) && pc < atomic_load(&lib_hi);
}

static atomic_ullong calls, failed;

static void nap_ms(const char *ms)
{
	long n = ms ? strtol(ms, NULL, 10) : 0;
	struct timespec t = { n / 1000, n % 1000 * 1000000L };
	if (n > 0)
		nanosleep(&t, NULL);
}

/* Whether this allocation, made by code at `caller`, is to fail. */
static bool inject(const void *caller)
{
	/* Read at the first allocation: libcugraft.so's constructor may run before ours would. */
	static unsigned long long fail_n;
	static bool fail_from;
	static const char *delay;
	static atomic_bool have_options;
	if (!atomic_load(&have_options)) {
		const char *n = getenv("FAULTALLOC_N"), *from = getenv("FAULTALLOC_FROM");
		fail_n = n ? strtoull(n, NULL, 10) : 0;
		fail_from = from && strcmp(from, "1") == 0;
		delay = getenv("FAULTALLOC_DELAY_MS");
		atomic_store(&have_options, true);
	}
	if (!from_lib(caller))
		return false;
	unsigned long long nth = atomic_fetch_add(&calls, 1) + 1;
	if (!fail_n || !(nth == fail_n || (fail_from && nth > fail_n)))
		return false;
	if (delay) {
		nap_ms(delay);
		return false;
	}
	atomic_fetch_add(&failed, 1);
	errno = ENOMEM;
	return true;
}

EXPORT void *malloc(size_t n)
{
	if (!resolve())
		return early_alloc(n);
	return inject(__builtin_return_address(0)) ? NULL : real_malloc(n);
}

EXPORT void *calloc(size_t k, size_t n)
{
	size_t bytes;
	if (!resolve())
		return __builtin_mul_overflow(k, n, &bytes) ? NULL : early_alloc(bytes); /* zeroed */
	return inject(__builtin_return_address(0)) ? NULL : real_calloc(k, n);
}

EXPORT void *realloc(void *p, size_t n)
{
	if (!resolve()) /* dlsym only callocs: nothing to grow yet */
		return p ? NULL : early_alloc(n);
	if (inject(__builtin_return_address(0)))
		return NULL;
	if (!is_early(p))
		return real_realloc(p, n);
	/* an early block's size is unknown: copy as much of the buffer after it as fits */
	size_t after = (size_t)(early + sizeof(early) - (char *)p);
	void *q = real_malloc(n);
	if (q)
		memcpy(q, p, after < n ? after : n);
	return q;
}

EXPORT void free(void *p)
{
	if (p && !is_early(p) && resolve())
		real_free(p);
}

/* libcugraft.so loads the driver with dlopen: the first time (in this process or the parent it was
 * forked from), from there, that waits FAULTALLOC_DLOPEN_DELAY_MS first. */
EXPORT void *dlopen(const char *file, int mode)
{
	static void *(*real_dlopen)(const char *, int);
	static atomic_bool delayed;
	if (!real_dlopen)
		real_dlopen = dlsym(RTLD_NEXT, "dlopen");
	if (file && strcmp(file, "libcuda.so.1") == 0 && from_lib(__builtin_return_address(0)) &&
	    !atomic_exchange(&delayed, true))
		nap_ms(getenv("FAULTALLOC_DLOPEN_DELAY_MS"));
	return real_dlopen ? real_dlopen(file, mode) : NULL;
}

/* One line per process (O_APPEND): a test's `timeout` wrapper is preloaded too. */
__attribute__((destructor)) static void stats(void)
{
	const char *path = getenv("FAULTALLOC_STATS");
	if (!path || !*path)
		return;
	char line[96];
	int len = snprintf(line, sizeof(line), "allocations %llu failed %llu\n",
	                   (unsigned long long)atomic_load(&calls),
	                   (unsigned long long)atomic_load(&failed));
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		if (write(fd, line, (size_t)len) < 0)
			perror("faultalloc: FAULTALLOC_STATS");
		close(fd);
	}
}
