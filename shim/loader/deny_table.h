/* Sizes and names of the generated trampolines (gen-deny.py). */
#ifndef CG_SHIM_DENY_TABLE_H
#define CG_SHIM_DENY_TABLE_H
#include <stddef.h>
extern const unsigned cg_deny_nexports;
extern const unsigned cg_deny_npool;
extern const char *const cg_deny_export_names[];
/* Trampolines are 16-byte slots: exported ones from cg_deny_exports, then the pool. */
extern const char cg_deny_exports[], cg_deny_pool[], cg_deny_pool_end[];
#endif
