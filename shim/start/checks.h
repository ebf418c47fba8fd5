/* Start-up checks of the environment (checks.c). */
#ifndef CG_SHIM_CHECKS_H
#define CG_SHIM_CHECKS_H

#include <stdbool.h>

struct cg_json;

/* CUDA_LAUNCH_BLOCKING: whether the program asked for synchronous launches (then nothing may be
 * deferred); said once. Before the engine is made. */
bool cg_check_launch_blocking(void);
void cg_startup_checks(void);
/* "startup_checks":[...] for the report header. */
void cg_startup_checks_json(struct cg_json *j);

#endif
