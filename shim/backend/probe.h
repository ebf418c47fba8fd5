/* Profile mode's probe (probe.c): what CUPTI's activity tracing adds to a launch call. The
 * profile run traces every kernel, and the tracing lengthens each launch call (by 1.6 us on an
 * H100, a third of the call): the GPU's idle time inside launch calls, and with it the
 * launch-gap bound, would count time that an untraced program never spends. */
#ifndef CG_SHIM_PROBE_H
#define CG_SHIM_PROBE_H

/* At a program launch call while cg_floor_probe_due (shim/observers/floor.h): loads an empty
 * kernel into the current context, times its launch calls on a stream of its own with kernel
 * records paused and on, and gives the medians to cg_floor_tracing; then unloads it. Left due
 * while the program captures or has no current context; the program's own launch follows. */
void cg_probe_tracing(void);

#endif
