/* A small seeded random generator (xorshift64) for the property tests: the same seed gives the
 * same trace on every machine, so a failure names a seed that reproduces it. */
#ifndef CG_TESTS_RNG_H
#define CG_TESTS_RNG_H

#include <stdbool.h>
#include <stdint.h>

struct rng {
	uint64_t s;
};

static inline uint64_t rnd(struct rng *r)
{
	r->s ^= r->s << 13;
	r->s ^= r->s >> 7;
	r->s ^= r->s << 17;
	return r->s;
}

static inline uint32_t below(struct rng *r, uint32_t n)
{
	return (uint32_t)(rnd(r) % n);
}

static inline bool chance(struct rng *r, uint32_t permille)
{
	return below(r, 1000) < permille;
}

#endif
