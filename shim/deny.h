/* Default deny: driver entry points nobody classified. Each is reached through a trampoline
 * that flushes all pending work and then jumps to the real function with the caller's registers
 * and stack untouched, so no prototype is needed (x86-64 only; elsewhere such entry points are
 * handed out raw after a warning). Exported trampolines cover programs that link libcuda
 * directly; dynamic ones cover pointers handed out by dlsym and cuGetProcAddress. */
#ifndef CG_SHIM_DENY_H
#define CG_SHIM_DENY_H

#include <stdbool.h>
#include <stdint.h>

/* Binds the exported trampolines (one per libcuda symbol not in cuda.def) to libcuda. */
void cg_deny_bind_exports(void *libcuda);
/* A trampoline forwarding to `real` (NULL when the pool is exhausted). */
void *cg_deny_trampoline(void *real, const char *name);
bool cg_deny_is_trampoline(const void *p);
/* For the report: name and calls of trampoline i; returns false past the last one. */
bool cg_deny_stat(unsigned i, const char **name, uint64_t *calls);

/* Called by the assembly trampolines: flush, count, return the real target. */
void *cg_deny_enter(uint32_t slot);

#endif
