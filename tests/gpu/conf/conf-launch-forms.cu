// conf-launch-forms: every launch form beyond plain <<<>>>: cooperative (grid.sync), thread-block
// clusters (distributed shared memory), programmatic dependent launch, 100 KB of dynamic shared
// memory, and a ~2 KB by-value template struct that changes every iteration. A shim that drops a
// launch attribute, the cooperative flag or the shared-memory size, or replays stale parameter
// bytes, fails the launch or changes the bytes.
#include "conf.h"
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

enum { N = 1 << 16, BLOCK = 256, TILE = 25600, TILES = 8 };   // TILE unsigneds = 100 KB

// Each block sums its slice (integer sums: order-free), then every element adds the sum of the
// next block, which is only complete after grid.sync(): wrong unless launched cooperatively.
__global__ void coop_neighbour_sum(unsigned *x, unsigned *partial, int n)
{
    cg::grid_group g = cg::this_grid();
    if (threadIdx.x == 0)
        partial[blockIdx.x] = 0;
    g.sync();
    unsigned s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s += x[i];
    atomicAdd(&partial[blockIdx.x], s);
    g.sync();
    unsigned add = partial[(blockIdx.x + 1) % gridDim.x];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = x[i] * 5u + add;
}

// Reads the partner block's shared memory through the cluster (2x1x1 at launch time).
__global__ void cluster_swap(unsigned *x, int n)
{
    __shared__ unsigned mine[BLOCK];
    cg::cluster_group cl = cg::this_cluster();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    mine[threadIdx.x] = i < n ? x[i] : 0u;
    cl.sync();
    unsigned other = cl.map_shared_rank(mine, (int)(cl.block_rank() ^ 1u))[threadIdx.x];
    cl.sync();   // the partner's shared memory stays alive until everyone has read it
    if (i < n)
        x[i] = x[i] * 3u + other;
}

__global__ void pdl_primary(const unsigned *x, unsigned *y, unsigned salt, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = (x[i] ^ salt) * 7u;
    __threadfence();
    cudaTriggerProgrammaticLaunchCompletion();
}

// Its first loop may overlap the primary; the second must see all of the primary's writes.
__global__ void pdl_secondary(unsigned *x, const unsigned *y, unsigned *z, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        z[i] = z[i] * 13u + 1u;
    cudaGridDependencySynchronize();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] += y[(i + 1) % n] + z[i];
}

__global__ void smem_reverse(unsigned *t, unsigned salt)
{
    extern __shared__ unsigned tile[];
    unsigned *g = t + (size_t)blockIdx.x * TILE;
    for (int j = threadIdx.x; j < TILE; j += blockDim.x)
        tile[j] = g[j];
    __syncthreads();
    for (int j = threadIdx.x; j < TILE; j += blockDim.x)
        g[j] ^= tile[TILE - 1 - j] * 0x01000193u + salt;
}

template <int W> struct P {
    float w[W];
    int k;
};
template <int W> __global__ void weigh(float *f, P<W> p, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        f[i] = f[i] * 0.5f + p.w[(i + p.k) % W];
}
template <int W> static P<W> weights(int it)
{
    P<W> p;
    for (int j = 0; j < W; j++)
        p.w[j] = 0.25f * (float)((j * 7 + it * 13) % 101);
    p.k = it * 3;
    return p;
}

static unsigned salt(int it, int k) { return 0x9e3779b9u * (unsigned)(it * 16 + k + 1); }

int main(int argc, char **argv)
{
    const int iters = conf_iters(argc, argv, 40);
    int coop_ok, per_sm, sms;
    CK(cudaDeviceGetAttribute(&coop_ok, cudaDevAttrCooperativeLaunch, 0));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, coop_neighbour_sum, BLOCK, 0));
    const int coop_grid = sms * (per_sm < 2 ? per_sm : 2);
    CONF_REQUIRE(coop_ok && coop_grid > 0);
    CK(cudaFuncSetAttribute(smem_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize, TILE * sizeof(unsigned)));

    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned *x, *y, *z, *t, *partial;
    float *f;
    CK(cudaMalloc(&x, N * sizeof(unsigned)));
    CK(cudaMalloc(&y, N * sizeof(unsigned)));
    CK(cudaMalloc(&z, N * sizeof(unsigned)));
    CK(cudaMalloc(&t, TILE * TILES * sizeof(unsigned)));
    CK(cudaMalloc(&partial, coop_grid * sizeof(unsigned)));
    CK(cudaMalloc(&f, N * sizeof(float)));
    CK(cudaMemsetAsync(x, 0x21, N * sizeof(unsigned), s));
    CK(cudaMemsetAsync(z, 0x03, N * sizeof(unsigned), s));
    CK(cudaMemsetAsync(t, 0x47, TILE * TILES * sizeof(unsigned), s));
    CK(cudaMemsetAsync(f, 0, N * sizeof(float), s));

    cudaLaunchAttribute cluster = {}, pdl = {};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim = {2, 1, 1};
    pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg_cluster = {};
    cfg_cluster.gridDim = dim3(N / BLOCK);   // even: whole clusters of two
    cfg_cluster.blockDim = dim3(BLOCK);
    cfg_cluster.stream = s;
    cfg_cluster.attrs = &cluster;
    cfg_cluster.numAttrs = 1;
    cudaLaunchConfig_t cfg_pdl = cfg_cluster;
    cfg_pdl.gridDim = dim3(64);
    cfg_pdl.attrs = &pdl;

    uint64_t h = WL_FNV_OFFSET;
    int n = N;
    for (int it = 0; it < iters; it++) {
        conf_mix<<<128, BLOCK, 0, s>>>(x, salt(it, 0), N);
        void *coop_args[] = {&x, &partial, &n};
        CK(cudaLaunchCooperativeKernel(coop_neighbour_sum, dim3(coop_grid), dim3(BLOCK), coop_args, 0, s));
        CK(cudaLaunchKernelEx(&cfg_cluster, cluster_swap, x, n));
        pdl_primary<<<64, BLOCK, 0, s>>>(x, y, salt(it, 1), N);
        CK(cudaLaunchKernelEx(&cfg_pdl, pdl_secondary, x, (const unsigned *)y, z, n));
        smem_reverse<<<TILES, BLOCK, TILE * sizeof(unsigned), s>>>(t, salt(it, 2));
        conf_fold<<<128, BLOCK, 0, s>>>(x, t, N);
        weigh<500><<<128, BLOCK, 0, s>>>(f, weights<500>(it), N);   // 2004 bytes by value
        weigh<24><<<64, BLOCK, 0, s>>>(f, weights<24>(it + 5), N);
        conf_mix<<<128, BLOCK, 0, s>>>(x, salt(it, 3), N);
        conf_mix<<<256, BLOCK, 0, s>>>(t, salt(it, 4), TILE * TILES);
        conf_mix<<<64, BLOCK, 0, s>>>(z, salt(it, 5), N);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(s));
        if (it % 10 == 0 || it == iters - 1) {
            h = conf_hash_dev(h, x, N * sizeof(unsigned));
            h = conf_hash_dev(h, y, N * sizeof(unsigned));
            h = conf_hash_dev(h, z, N * sizeof(unsigned));
            h = conf_hash_dev(h, t, TILE * TILES * sizeof(unsigned));
            h = conf_hash_dev(h, f, N * sizeof(float));
            conf_print(h);
        }
    }
    CK(cudaFree(x));
    CK(cudaFree(y));
    CK(cudaFree(z));
    CK(cudaFree(t));
    CK(cudaFree(partial));
    CK(cudaFree(f));
    CK(cudaStreamDestroy(s));
    return 0;
}
