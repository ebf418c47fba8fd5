/* The report's header line, the exit summary and the record of a fatal signal (summary.c). */
#ifndef CG_SHIM_SUMMARY_H
#define CG_SHIM_SUMMARY_H

/* The header: version, pid, rank, options, driver, device, NCCL, start-up checks. */
void cg_summary_header(void);
/* The closing summary: engine counters, boundaries, entry points, streams, devices, ... */
void cg_summary_write(void);
/* Where the program has no handler of its own: SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL and
 * SIGTERM leave a {"event":"signal"} record in the report before the process dies. */
void cg_summary_catch_fatal(void);

#endif
