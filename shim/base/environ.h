/* The process environment as the program sees it under libcugraft (environ.c). */
#ifndef CG_SHIM_ENVIRON_H
#define CG_SHIM_ENVIRON_H

#include <stdbool.h>

/* From now on getenv(name) answers `value` where the variable is unset (the environment itself
 * is not changed; a child process decides for itself). `name` and `value` must stay valid. At
 * most a few such defaults; false when there is no room. */
bool cg_environ_default(const char *name, const char *value);

#endif
