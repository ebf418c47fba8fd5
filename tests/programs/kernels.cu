// GPU versions of the fake driver's built-in kernels (tests/fakecuda/kernels.c), so the same
// test programs run on a real GPU. One-thread kernels do their work in thread 0 of block 0;
// elementwise ones use a grid-stride loop. Explicit _rn arithmetic keeps nvcc from fusing
// multiply-adds, so results match the CPU fake bit for bit.

extern "C" __global__ void cg_chain(unsigned long long *acc, unsigned long long tag)
{
  if (threadIdx.x == 0 && blockIdx.x == 0) *acc = (*acc * 1000003ULL) ^ tag;
}

#define GRID_STRIDE(i, n) \
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

extern "C" __global__ void cg_fill_f32(float *p, float v, int n)
{
  GRID_STRIDE(i, n) p[i] = v;
}

extern "C" __global__ void cg_axpy_f32(float *y, const float *x, float a, int n)
{
  GRID_STRIDE(i, n) y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

extern "C" __global__ void cg_scale_f32(float *p, float a, int n)
{
  GRID_STRIDE(i, n) p[i] = __fmul_rn(p[i], a);
}

extern "C" __global__ void cg_step_mix(float *p, int n, unsigned long long step)
{
  GRID_STRIDE(i, n)
    p[i] = __fadd_rn(__fmul_rn(p[i], 0.5f),
                     __fdiv_rn((float)((step * 2654435761ULL + (unsigned long long)i) % 1000), 1000.f));
}

extern "C" __global__ void cg_set_flag(volatile int *flag, int v)
{
  if (threadIdx.x == 0 && blockIdx.x == 0) { *flag = v; __threadfence_system(); }
}

extern "C" __global__ void cg_wait_flag(volatile int *flag, int v)
{
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    flag[1] = 1;
    __threadfence_system();
    while (flag[0] < v) {}
  }
}

/* Every block waits for flag[0] to reach v: launched with more blocks than fit at once, it holds
 * every SM until a producer on another stream sets the flag (conf_edges --mode order). */
extern "C" __global__ void cg_wait_all(volatile int *flag, int v)
{
  if (threadIdx.x == 0)
    while (flag[0] < v) {}
  __syncthreads();
}

struct cg_big { unsigned long long v[64]; };

extern "C" __global__ void cg_big_arg(cg_big s, unsigned long long *out)
{
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  unsigned long long sum = 0;
  for (int i = 0; i < 64; i++) sum += s.v[i];
  *out = (*out * 31) ^ sum;
}

// Its work is its launch shape (the fake's k_grid_sum): integer atomics, so the sum does not
// depend on the order threads run in. At most 512 threads per block, as in the fake: a larger
// block is a shape only this function refuses (conf_grow --limit).
extern "C" __global__ void __launch_bounds__(512) cg_grid_sum(unsigned long long *out, const unsigned *in)
{
  unsigned long long b = blockIdx.x + gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
  unsigned long long t = threadIdx.x + blockDim.x * (threadIdx.y + (unsigned long long)blockDim.y * threadIdx.z);
  unsigned long long i = b * (blockDim.x * blockDim.y * blockDim.z) + t;
  unsigned long long v = (in[i] + 1ULL) * (i + 1) + t * 1000003ULL + blockIdx.y * 31 +
                         blockIdx.z * 37 + threadIdx.y * 41 + threadIdx.z * 43;
  if (b == 0 && t == 0) {
    unsigned shmem;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(shmem));
    v += shmem * 7919ULL;
  }
  atomicAdd(out, v);
}
