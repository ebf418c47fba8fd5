/* Bit mixing shared by the signature hash and the chunk tables: MurmurHash3's 64-bit finaliser
 * and a rotation. */
#ifndef CG_POLICY_MIX_H
#define CG_POLICY_MIX_H

#include <stdint.h>

static inline uint64_t cg_fmix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* r in 1..63 */
static inline uint64_t cg_rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

#endif
