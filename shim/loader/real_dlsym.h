/* The real dlsym and dlvsym (real_dlsym.c). libcugraft hooks both (dlsym.c), so its own calls
 * would reach its hooks: the real ones are found by reading the loaded objects' symbol tables. */
#ifndef CG_SHIM_REAL_DLSYM_H
#define CG_SHIM_REAL_DLSYM_H

/* The real dlsym and dlvsym, resolved on first use. Called from here, RTLD_DEFAULT and
 * RTLD_NEXT mean libcugraft's scope, not the program's: the hooks pass those lookups on. */
void *cg_real_dlsym(void *handle, const char *name);
void *cg_real_dlvsym(void *handle, const char *name, const char *version);
/* The real functions themselves (NULL if not found), for the hooks' tail jumps. */
void *cg_resolve_real_dlsym(void);
void *cg_resolve_real_dlvsym(void);

#endif
