/* Source locations for report frames (srcline.c). */
#ifndef CG_TOOLS_SRCLINE_H
#define CG_TOOLS_SRCLINE_H

#include <stdbool.h>
#include <stddef.h>

/* "file:line" of a frame given as "PATH+0xOFFSET"; false when unknown (no debug information,
 * no addr2line, no such file). */
bool cg_srcline(const char *where, char *out, size_t size);

#endif
