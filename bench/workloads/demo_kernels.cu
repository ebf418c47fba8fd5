// Kernels of cugraft-demo-work. The CPU fake driver (tests/fakecuda) implements these exact names
// and parameter lists on the host, so results must not depend on FMA contraction: every
// multiply-add is written with explicitly rounded intrinsics to match plain C float arithmetic.

#define CG_INDEX() (blockIdx.x * blockDim.x + threadIdx.x)

extern "C" __global__ void cg_chain(unsigned long long *acc, unsigned long long tag)
{
    if (CG_INDEX() == 0)
        *acc = (*acc * 1000003ULL) ^ tag;
}

extern "C" __global__ void cg_fill_f32(float *p, float v, int n)
{
    int i = CG_INDEX();
    if (i < n)
        p[i] = v;
}

extern "C" __global__ void cg_axpy_f32(float *y, const float *x, float a, int n)
{
    int i = CG_INDEX();
    if (i < n)
        y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

extern "C" __global__ void cg_scale_f32(float *p, float a, int n)
{
    int i = CG_INDEX();
    if (i < n)
        p[i] = __fmul_rn(p[i], a);
}

extern "C" __global__ void cg_step_mix(float *p, int n, unsigned long long step)
{
    int i = CG_INDEX();
    if (i < n)
        p[i] = __fadd_rn(__fmul_rn(p[i], 0.5f),
                         __fdiv_rn((float)((step * 2654435761ULL + i) % 1000), 1000.f));
}
