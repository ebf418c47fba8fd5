/* Start-up, the background flusher and exit work (init.c): the top of the shim. */
#ifndef CG_SHIM_INIT_H
#define CG_SHIM_INIT_H

/* Called once the driver is loaded: options, engine, flusher thread, report. The shim counts as
 * ready (cg_driver_ready) only after it returns. */
void cg_shim_start(void);
/* Exit work, once: flush, destroy graphs, write the summary. */
void cg_shim_exit(void);

#endif
