/* Default deny: driver entry points nobody classified. Each is reached through a trampoline
 * that flushes all pending work and then jumps to the real function with the caller's registers
 * and stack untouched, so no prototype is needed (x86-64 only; elsewhere such entry points are
 * handed out raw after a warning). Exported trampolines cover programs that link libcuda
 * directly; dynamic ones cover pointers handed out by dlsym and cuGetProcAddress. */
#ifndef CG_SHIM_DENY_H
#define CG_SHIM_DENY_H

#include <stdint.h>

/* The trampolines themselves are the loader's (trampoline.h). Called by the assembly
 * trampolines: flush, count, return the real target. */
void *cg_deny_enter(uint32_t slot);

#endif
