/* Start-up checks of the environment (checks.c). */
#ifndef CG_SHIM_CHECKS_H
#define CG_SHIM_CHECKS_H

struct cg_json;

void cg_startup_checks(void);
/* "startup_checks":[...] for the report header. */
void cg_startup_checks_json(struct cg_json *j);

#endif
