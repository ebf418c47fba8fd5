/* The signature hash: run on every intercepted launch, so it reads 8-byte words on two
 * independent lanes (a 96-byte signature costs a few ns). Never 0: 0 in struct cg_op means
 * "not computed yet". Chunk cutting reads the high 32 bits, so the finaliser mixes every bit. */
#include <string.h>
#include "policy/mix.h"
#include "policy/op.h"

#define K1 0x87c37b91114253d5ull
#define K2 0x4cf5ad432745937full

static inline uint64_t load64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

uint64_t cg_sig_hash(const void *bytes, size_t len)
{
	const unsigned char *p = bytes;
	/* The length seeds lane a, so inputs that differ only by trailing zero bytes differ. */
	uint64_t a = 0x9e3779b97f4a7c15ull ^ len, b = 0xc2b2ae3d27d4eb4full;

	for (; len >= 16; p += 16, len -= 16) {
		a = cg_rotl64(a ^ (load64(p) * K1), 31) * K2;
		b = cg_rotl64(b ^ (load64(p + 8) * K2), 29) * K1;
	}
	if (len >= 8) {
		a = cg_rotl64(a ^ (load64(p) * K1), 31) * K2;
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t tail = 0;
		memcpy(&tail, p, len);
		b = cg_rotl64(b ^ (tail * K2), 29) * K1;
	}
	uint64_t h = cg_fmix64(a ^ cg_rotl64(b, 32));
	return h ? h : 1;
}
