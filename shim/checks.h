/* Start-up checks of the environment (checks.c). */
#ifndef CG_SHIM_CHECKS_H
#define CG_SHIM_CHECKS_H

struct cg_json;

void cg_startup_checks(void);
/* A setting noticed while running (once each): said on stderr and as a report "note" line. */
void cg_note_once(int *once, const char *text);
/* "startup_checks":[...] for the report header. */
void cg_startup_checks_json(struct cg_json *j);

#endif
