/* Compile-time proof that every export of the fake driver has cuda.h's prototype. In its
 * internal mode cuda.h declares every exported ABI (legacy, _v2.., _ptsz): redeclaring our
 * hand-written prototypes after it fails to compile on any mismatch, and each api.def row must
 * name a function cuda.h declares. The definitions in the other files are checked against the
 * same prototypes by the ordinary compiler rule. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include "protos.h"

#define CG_API(sym, base, ver, ptsz) \
  _Static_assert(__builtin_types_compatible_p(__typeof__(sym) *, __typeof__(&sym)), #sym);
#include "api.def"
#undef CG_API
