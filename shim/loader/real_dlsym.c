/* The real dlsym and dlvsym (real_dlsym.h), found without calling either. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "real_dlsym.h"

/* Both are hooked (dlsym_x86_64.S), so our own references to them bind to the hooks: even one
 * to dlvsym@GLIBC_2.34 binds to our unversioned export. The real dlvsym is therefore found by
 * reading the dynamic symbol tables of the objects loaded after ours, in load order, as
 * dlsym(RTLD_NEXT, "dlvsym") would; the real dlsym then through it. Never _dl_sym, which is
 * private to glibc and changed ABI before. This path runs inside a sanitizer runtime's own start
 * (its interceptors look up libc through our dlsym), before that runtime is ready: no
 * instrumentation, and no call into libc that a sanitizer intercepts. */
#define CG_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))

static void *(*_Atomic real_dlsym_ptr)(void *, const char *);
static void *(*_Atomic real_dlvsym_ptr)(void *, const char *, const char *);

CG_NO_SANITIZE static bool same_name(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

/* A d_ptr of the dynamic section: ld.so relocates it in place, except in a read-only dynamic
 * section (the vdso's), where it is still an offset, below any load address. */
CG_NO_SANITIZE static uintptr_t dyn_ptr(const struct link_map *lm, const ElfW(Dyn) *d)
{
	uintptr_t p = d->d_un.d_ptr;
	return p < lm->l_addr ? p + lm->l_addr : p;
}

/* The default version of function `name` defined by one loaded object (GNU hash table). */
CG_NO_SANITIZE static void *object_function(const struct link_map *lm, const char *name)
{
	const ElfW(Sym) *sym = NULL;
	const char *str = NULL;
	const ElfW(Half) *versym = NULL;
	const uint32_t *gnu = NULL;
	for (const ElfW(Dyn) *d = lm->l_ld; d && d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_SYMTAB)
			sym = (const ElfW(Sym) *)dyn_ptr(lm, d);
		else if (d->d_tag == DT_STRTAB)
			str = (const char *)dyn_ptr(lm, d);
		else if (d->d_tag == DT_VERSYM)
			versym = (const ElfW(Half) *)dyn_ptr(lm, d);
		else if (d->d_tag == DT_GNU_HASH)
			gnu = (const uint32_t *)dyn_ptr(lm, d);
	}
	if (!sym || !str || !gnu || gnu[0] == 0)
		return NULL;
	uint32_t h = 5381;
	for (const char *c = name; *c; c++)
		h = h * 33 + (unsigned char)*c;
	uint32_t nbuckets = gnu[0], first = gnu[1], bloom_words = gnu[2];
	const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + bloom_words);
	const uint32_t *chain = buckets + nbuckets;
	for (uint32_t i = buckets[h % nbuckets]; i >= first && i != 0; i++) {
		uint32_t c = chain[i - first];
		const ElfW(Sym) *s = &sym[i];
		/* 0x8000: a hidden (non-default) version such as dlvsym@GLIBC_2.2.5 beside @@GLIBC_2.34 */
		if ((c | 1) == (h | 1) && s->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(s->st_info) == STT_FUNC &&
		    (!versym || !(versym[i] & 0x8000)) && same_name(str + s->st_name, name))
			return (void *)(lm->l_addr + s->st_value);
		if (c & 1)
			break;
	}
	return NULL;
}

CG_NO_SANITIZE void *cg_resolve_real_dlvsym(void)
{
	void *(*p)(void *, const char *, const char *) =
		atomic_load_explicit(&real_dlvsym_ptr, memory_order_acquire);
	if (p)
		return (void *)p;
	Dl_info info;
	struct link_map *self = NULL;
	if (!dladdr1((void *)cg_resolve_real_dlvsym, &info, (void **)&self, RTLD_DL_LINKMAP) || !self)
		return NULL;
	for (const struct link_map *lm = self->l_next; lm && !p; lm = lm->l_next)
		p = (void *(*)(void *, const char *, const char *))object_function(lm, "dlvsym");
	atomic_store_explicit(&real_dlvsym_ptr, p, memory_order_release);
	return (void *)p;
}

CG_NO_SANITIZE void *cg_resolve_real_dlsym(void)
{
	void *(*p)(void *, const char *) = atomic_load_explicit(&real_dlsym_ptr, memory_order_acquire);
	void *(*v)(void *, const char *, const char *) = p ? NULL : cg_resolve_real_dlvsym();
	if (v) {
		/* Called from here, RTLD_NEXT means the next object after ours. GLIBC_2.34 is where
		 * dlsym moved into libc proper. */
		p = (void *(*)(void *, const char *))v(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!p)
			p = (void *(*)(void *, const char *))v(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
		atomic_store_explicit(&real_dlsym_ptr, p, memory_order_release);
	}
	return (void *)p;
}

void *cg_real_dlsym(void *handle, const char *name)
{
	void *(*p)(void *, const char *) = cg_resolve_real_dlsym();
	return p ? p(handle, name) : NULL;
}

void *cg_real_dlvsym(void *handle, const char *name, const char *version)
{
	void *(*p)(void *, const char *, const char *) = cg_resolve_real_dlvsym();
	return p ? p(handle, name, version) : NULL;
}
