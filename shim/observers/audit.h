/* Audit mode (CUGRAFT_AUDIT=1): CUPTI sees every driver call; a launch or stream-ordered call
 * that reached the driver without passing through the shim is an escape, and is reported. */
#ifndef CG_SHIM_AUDIT_H
#define CG_SHIM_AUDIT_H

struct cg_json;

void cg_audit_start(void);
/* libcupti, dlopen'ed (the toolkit's usual places, then $CUDA_HOME), or NULL. */
void *cg_cupti_open(void);
/* "audit":{...} in the summary, when audit mode ran. */
void cg_audit_json(struct cg_json *j);

#endif
