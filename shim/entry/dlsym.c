/* The dlsym and dlvsym hooks: libcudart, PyTorch, Triton and NCCL fetch driver entry points with
 * dlsym on a libcuda handle, which LD_PRELOAD alone never sees. Lookups that land inside libcuda
 * are handed the shim's pointer for that entry point (driver.c); all others are glibc's own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "shim/loader/driver.h"
#include "nccl_hooks.h"
#include "shim/loader/real_dlsym.h"
#include "shim/base/shim.h"

/* What a hook does (dlsym_x86_64.S): return `value`, or, when `tail` is set, jump to `tail` (the
 * real function) with the caller's arguments and return address in place. Two pointers come
 * back in rax:rdx. */
struct cg_dl_route {
	void *value;
	void *tail;
};

/* Sanitizer runtimes look up libc through these hooks while they start: see driver.c. */
#define CG_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))

/* A name the shim may hand out a pointer of its own for: driver entry points start with "cu",
 * NCCL's with "nccl". Plain compares: strncmp is a sanitizer interceptor. */
CG_NO_SANITIZE static bool concerns_us(const char *name)
{
	if (!name)
		return false;
	if (name[0] == 'c' && name[1] == 'u')
		return true;
#ifdef CG_HAVE_NCCL
	return name[0] == 'n' && name[1] == 'c' && name[2] == 'c' && name[3] == 'l';
#else
	return false;
#endif
}

static bool in_libcuda_file(const void *p)
{
	Dl_info info;
	return dladdr(p, &info) && info.dli_fname && strstr(info.dli_fname, "libcuda.so");
}

/* What the caller gets for `real`, glibc's answer to its lookup of `name`. */
static void *hand_out(void *real, const char *name)
{
#ifdef CG_HAVE_NCCL
	/* NCCL's API looked up on a libnccl handle (a framework that loads NCCL itself). */
	if (real && name[0] == 'n')
		return cg_nccl_handout(real, name);
#endif
	if (!real || name[0] != 'c' || cg_driver_in_init())
		return real;
	/* Only lookups that land in libcuda concern us (curl_* starts with "cu" too); processes
	 * that never touch the driver must not get it loaded by us. */
	if (!in_libcuda_file(real))
		return real;
	cg_driver_init();
	if (!cg_driver_ready())
		return real;
	return cg_handout(real, name);
}

/* hand_out, for a lookup of the caller that found `real`. glibc left no error for its dlerror()
 * then; any there is now came from the shim's own lookups while it started inside this call (an
 * entry point this driver lacks): it is not the caller's, and goes. */
static void *answer(void *real, const char *name)
{
	void *value = hand_out(real, name);
	if (real)
		dlerror();
	return value;
}

/* glibc answers RTLD_DEFAULT and RTLD_NEXT from the scope of the object that called dlsym, which
 * it finds by the return address: a lookup made from here would search libcugraft's scope (the
 * global one only), and a library opened RTLD_LOCAL would miss its own dependencies. Those go to
 * the real function by a tail jump that leaves the caller's return address in place: glibc's
 * own answer, exactly, with nothing of ours in between.
 * Handle lookups do not depend on the caller (only an LD_AUDIT symbind callback would see us as
 * the one binding), so those that concern us are made here and handed out.
 * RTLD_DEFAULT for a driver name is the one mixed case. The global scope comes first in every
 * caller's scope, and our exports of every driver function the toolkit lists lie in it before
 * libcuda: the caller gets our export, glibc's answer, by the tail jump. A name we do not export
 * that a global libcuda has (a driver newer than the toolkit) would reach the program raw, past
 * default deny: a lookup from here, in the global scope, finds exactly what the caller's finds
 * first, and that one is handed out. (Inexact only for a caller opened RTLD_DEEPBIND whose own
 * dependencies define that same unlisted name.) */
/* A process that has not loaded libcuda has no driver entry point to find, and programs probe
 * RTLD_DEFAULT to learn whether CUDA is there: our exports must not answer for it. The lookup
 * past libcugraft (RTLD_NEXT from here) is then glibc's answer without us, and sets dlerror()
 * as it would. */
static bool no_driver_loaded(void *handle, const char *name)
{
	if (handle != RTLD_DEFAULT || name[0] != 'c')
		return false;
	void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (cuda)
		dlclose(cuda);
	return !cuda;
}

struct cg_dl_route cg_dlsym_route(void *handle, const char *name);
CG_NO_SANITIZE struct cg_dl_route cg_dlsym_route(void *handle, const char *name)
{
	struct cg_dl_route r = { NULL, cg_resolve_real_dlsym() };
	if (!r.tail || handle == RTLD_NEXT || !concerns_us(name))
		return r;
	if (no_driver_loaded(handle, name)) {
		r.value = cg_real_dlsym(RTLD_NEXT, name);
		r.tail = NULL;
		return r;
	}
	void *real = cg_real_dlsym(handle, name);
	if (handle == RTLD_DEFAULT && !(real && name[0] == 'c' && in_libcuda_file(real)))
		return r;
	r.value = answer(real, name);
	r.tail = NULL;
	return r;
}

struct cg_dl_route cg_dlvsym_route(void *handle, const char *name, const char *version);
CG_NO_SANITIZE struct cg_dl_route cg_dlvsym_route(void *handle, const char *name, const char *version)
{
	struct cg_dl_route r = { NULL, cg_resolve_real_dlvsym() };
	if (!r.tail || handle == RTLD_NEXT || !concerns_us(name))
		return r;
	if (no_driver_loaded(handle, name)) {
		r.value = cg_real_dlvsym(RTLD_NEXT, name, version);
		r.tail = NULL;
		return r;
	}
	void *real = cg_real_dlvsym(handle, name, version);
	if (handle == RTLD_DEFAULT && !(real && name[0] == 'c' && in_libcuda_file(real)))
		return r;
	r.value = answer(real, name);
	r.tail = NULL;
	return r;
}
