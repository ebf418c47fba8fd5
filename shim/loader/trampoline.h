/* Default deny's trampolines (trampoline.c, deny_x86_64.S and the generated exports): a slot per
 * trampoline, bound to a real driver function when libcuda is loaded or handed out. The loader's
 * part: what a trampoline does before its jump is the entry points' (deny.h). */
#ifndef CG_SHIM_TRAMPOLINE_H
#define CG_SHIM_TRAMPOLINE_H

#include <stdbool.h>
#include <stdint.h>

#define CG_TRAMPOLINE_SLOTS 4096

/* Binds the exported trampolines (one per libcuda symbol not in cuda.def) to libcuda. */
void cg_deny_bind_exports(void *libcuda);
/* A trampoline forwarding to `real` (NULL when the pool is exhausted). */
void *cg_deny_trampoline(void *real, const char *name);
bool cg_deny_is_trampoline(const void *p);
/* For the report: name and calls of trampoline i; returns false past the last one. */
bool cg_deny_stat(unsigned i, const char **name, uint64_t *calls);

/* Slot `slot`: its real target (a stand-in returning CUDA_ERROR_NOT_FOUND when it has none), its
 * name, and counting one call (returns the calls before it). */
void *cg_trampoline_target(uint32_t slot);
const char *cg_trampoline_name(uint32_t slot);
uint64_t cg_trampoline_count(uint32_t slot);

#endif
