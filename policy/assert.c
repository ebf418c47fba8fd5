/* A failed CG_ASSERT (assert.h). */
#include <stdio.h>
#include <stdlib.h>
#include "policy/assert.h"

void cg_assert_failed(const char *cond, const char *file, int line)
{
	fprintf(stderr, "cugraft: internal error: %s:%d: %s does not hold\n", file, line, cond);
	abort();
}
