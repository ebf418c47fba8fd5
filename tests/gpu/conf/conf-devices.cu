// conf-devices: the current context changing under the runtime every iteration: cudaSetDevice,
// cuCtxSetCurrent and cuCtxPushCurrent/PopCurrent of primary contexts, and device 1 too when there
// is one. A shim that keys its state on "the" context, or flushes a stream in the wrong context,
// fails a launch (invalid handle/context) or replays work on the wrong device.
#include "conf.h"
#include <cuda.h>

#define CKD(call) conf_check_drv((call), #call, __FILE__, __LINE__)
static void conf_check_drv(CUresult r, const char *what, const char *file, int line)
{
    if (r != CUDA_SUCCESS) {
        const char *msg = "unknown";
        cuGetErrorString(r, &msg);
        fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, msg);
        exit(1);
    }
}

enum { N = 1 << 15, BLOCK = 256, GRID = 64, MAXDEV = 2 };

static unsigned salt(int dev, int it, int k) { return 0x27d4eb2fu * (unsigned)(dev * 4096 + it * 16 + k + 1); }

int main(int argc, char **argv)
{
    const int iters = conf_iters(argc, argv, 40);
    int count;
    CK(cudaGetDeviceCount(&count));
    const int ndev = count < MAXDEV ? count : MAXDEV;
    printf("devices %d\n", count);

    CUcontext prim[MAXDEV];
    cudaStream_t s[MAXDEV];
    unsigned *x[MAXDEV], *y[MAXDEV];
    for (int d = 0; d < ndev; d++) {
        CK(cudaSetDevice(d));   // creates the primary context the driver calls below retain
        CUdevice dev;
        CKD(cuDeviceGet(&dev, d));
        CKD(cuDevicePrimaryCtxRetain(&prim[d], dev));
        CK(cudaStreamCreate(&s[d]));   // blocking: ordered against the legacy stream below
        CK(cudaMalloc(&x[d], N * sizeof(unsigned)));
        CK(cudaMalloc(&y[d], N * sizeof(unsigned)));
        CK(cudaMemset(x[d], 0x10 + d, N * sizeof(unsigned)));
        CK(cudaMemset(y[d], 0x20 + d, N * sizeof(unsigned)));
        CK(cudaDeviceSynchronize());
    }

    uint64_t h = WL_FNV_OFFSET;
    for (int it = 0; it < iters; it++) {
        CK(cudaSetDevice(0));
        for (int k = 0; k < 4; k++)
            conf_mix<<<GRID, BLOCK, 0, s[0]>>>(x[0], salt(0, it, k), N);
        // The same primary context made current through the driver: the runtime follows it.
        CKD(cuCtxSetCurrent(prim[0]));
        conf_fold<<<GRID, BLOCK, 0, s[0]>>>(y[0], x[0], N);
        conf_mix<<<GRID, BLOCK>>>(y[0], salt(0, it, 4), N);   // legacy stream of device 0
        for (int d = 1; d < ndev; d++) {
            CKD(cuCtxSetCurrent(prim[d]));
            for (int k = 0; k < 4; k++)
                conf_mix<<<GRID, BLOCK, 0, s[d]>>>(x[d], salt(d, it, k), N);
            CK(cudaSetDevice(d));
            conf_fold<<<GRID, BLOCK, 0, s[d]>>>(y[d], x[d], N);
        }
        // Pushed on top of whatever is current, then popped back.
        CKD(cuCtxPushCurrent(prim[0]));
        conf_mix<<<GRID, BLOCK, 0, s[0]>>>(y[0], salt(0, it, 5), N);
        conf_fold<<<GRID, BLOCK, 0, s[0]>>>(x[0], y[0], N);
        CUcontext cur, popped;
        CKD(cuCtxGetCurrent(&cur));
        CONF_REQUIRE(cur == prim[0]);
        CKD(cuCtxPopCurrent(&popped));
        CONF_REQUIRE(popped == prim[0]);
        CKD(cuCtxGetCurrent(&cur));
        CONF_REQUIRE(cur == prim[ndev - 1]);   // the shim's own context work must not show
        CK(cudaSetDevice(0));
        for (int k = 6; k < 9; k++)
            conf_mix<<<GRID, BLOCK, 0, s[0]>>>(k % 2 ? x[0] : y[0], salt(0, it, k), N);
        CK(cudaGetLastError());
        for (int d = ndev - 1; d >= 0; d--) {
            CK(cudaSetDevice(d));
            CK(cudaDeviceSynchronize());
        }
        if (it % 10 == 0 || it == iters - 1) {
            for (int d = 0; d < ndev; d++) {
                CK(cudaSetDevice(d));
                h = conf_hash_dev(h, x[d], N * sizeof(unsigned));
                h = conf_hash_dev(h, y[d], N * sizeof(unsigned));
            }
            conf_print(h);
        }
    }
    for (int d = 0; d < ndev; d++) {
        CK(cudaSetDevice(d));
        CK(cudaFree(x[d]));
        CK(cudaFree(y[d]));
        CK(cudaStreamDestroy(s[d]));
        CUdevice dev;
        CKD(cuDeviceGet(&dev, d));
        CKD(cuDevicePrimaryCtxRelease(dev));
    }
    return 0;
}
