/* The NCCL wrappers (nccl_hooks.c, generated from nccl.def) as the rest of the shim sees them.
 * Built only where nccl.h is found (CG_HAVE_NCCL). */
#ifndef CG_SHIM_NCCL_HOOKS_H
#define CG_SHIM_NCCL_HOOKS_H

struct cg_json;

/* What a dlsym of an NCCL name gets: our wrapper for a listed entry whose real function lies in
 * libnccl, else `real`. */
void *cg_nccl_handout(void *real, const char *name);
/* The summary's "collectives":{name: calls}. */
void cg_nccl_json(struct cg_json *j);
/* The loaded libnccl's version code (0: none). */
int cg_nccl_version(void);

#endif
