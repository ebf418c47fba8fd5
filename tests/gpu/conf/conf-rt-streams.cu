// conf-rt-streams: <<<>>> on the legacy default stream interleaved with blocking streams, whose
// only ordering against it is the legacy implicit synchronisation, a non-blocking stream and the
// lowest/highest priority streams. A shim that defers per stream and forgets the legacy rule
// lets a blocking stream read a buffer before (or after) the legacy kernel that writes it.
#include "conf.h"

enum { N = 1 << 16, BLOCK = 256, GRID = 128 };

static unsigned salt(int it, int k) { return 0x01000193u * (unsigned)(it * 64 + k) + 0x7f4a7c15u; }

int main(int argc, char **argv)
{
    const int iters = conf_iters(argc, argv, 40);
    int least, greatest;
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));

    // b1, b2 and lo are blocking (ordered against legacy work); nb and hi are not.
    cudaStream_t b1, b2, nb, lo, hi;
    CK(cudaStreamCreate(&b1));
    CK(cudaStreamCreateWithFlags(&b2, cudaStreamDefault));
    CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithPriority(&lo, cudaStreamDefault, least));
    CK(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));

    enum { A, B1, B2, NB, LO, HI, NBUF };
    unsigned *buf[NBUF];
    for (int b = 0; b < NBUF; b++) {
        CK(cudaMalloc(&buf[b], N * sizeof(unsigned)));
        CK(cudaMemset(buf[b], b + 1, N * sizeof(unsigned)));
    }
    CK(cudaDeviceSynchronize());

    uint64_t h = WL_FNV_OFFSET;
    for (int it = 0; it < iters; it++) {
        // Legacy reads LO before lo (blocking) overwrites it below: lo waits for these kernels.
        conf_fold<<<GRID, BLOCK>>>(buf[A], buf[LO], N);
        conf_mix<<<GRID, BLOCK>>>(buf[A], salt(it, 0), N);
        // Blocking streams read A: they wait for the legacy kernels above, nothing else orders it.
        conf_fold<<<GRID, BLOCK, 0, b1>>>(buf[B1], buf[A], N);
        conf_mix<<<GRID, BLOCK, 0, b1>>>(buf[B1], salt(it, 1), N);
        conf_fold<<<GRID / 2, BLOCK, 0, b2>>>(buf[B2], buf[A], N);
        conf_mix<<<GRID / 2, BLOCK, 0, b2>>>(buf[B2], salt(it, 2), N);
        // Independent chains on their own buffers (no legacy kernel may touch NB or HI).
        for (int k = 0; k < 3; k++)
            conf_mix<<<GRID, BLOCK, 0, nb>>>(buf[NB], salt(it, 3 + k), N);
        conf_mix<<<GRID, BLOCK, 0, lo>>>(buf[LO], salt(it, 6), N);
        conf_mix<<<GRID, BLOCK, 0, lo>>>(buf[LO], salt(it, 7), N);
        conf_mix<<<GRID, BLOCK, 0, hi>>>(buf[HI], salt(it, 8), N);
        conf_mix<<<GRID, BLOCK, 0, hi>>>(buf[HI], salt(it, 9), N);
        // Legacy again: waits for b1, b2 (which read A before it is overwritten) and lo.
        conf_fold<<<GRID, BLOCK>>>(buf[A], buf[B1], N);
        conf_fold<<<GRID, BLOCK>>>(buf[A], buf[B2], N);
        conf_fold<<<GRID, BLOCK>>>(buf[A], buf[LO], N);
        conf_mix<<<GRID, BLOCK>>>(buf[A], salt(it, 10), N);
        // b1 reads A once more; the next legacy kernel (next iteration) waits for it.
        conf_fold<<<GRID, BLOCK, 0, b1>>>(buf[B1], buf[A], N);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        if (it % 10 == 0 || it == iters - 1) {
            for (int b = 0; b < NBUF; b++)
                h = conf_hash_dev(h, buf[b], N * sizeof(unsigned));
            conf_print(h);
        }
    }
    for (int b = 0; b < NBUF; b++)
        CK(cudaFree(buf[b]));
    CK(cudaStreamDestroy(b1));
    CK(cudaStreamDestroy(b2));
    CK(cudaStreamDestroy(nb));
    CK(cudaStreamDestroy(lo));
    CK(cudaStreamDestroy(hi));
    return 0;
}
