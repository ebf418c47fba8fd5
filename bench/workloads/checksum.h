/* The result fingerprint every workload prints as `checksum <16 hex digits>`: 64-bit FNV-1a over
 * the bytes of its final buffers, so eager, cugraft and hand-made runs compare bit for bit. */
#ifndef BENCH_CHECKSUM_H
#define BENCH_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>

#define WL_FNV_OFFSET 0xcbf29ce484222325ULL

static inline uint64_t wl_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}
#endif
