// Kernels of known signatures for the image parser's test (tests/unit/shim_image.c): none, one,
// many, mixed sizes and alignments, structs by value (small, padded, over 4 KiB), templates.
struct three { char c[3]; };
struct mixed { char a; double d; short s; };
struct vec4 { float4 v; };
struct huge { char c[20000]; };
struct big { unsigned long long v[64]; };

extern "C" __global__ void img_none() {}
extern "C" __global__ void img_one(int *p) { *p = 1; }
extern "C" __global__ void img_mixed(char a, double b, short c, int *d, float e, three f, mixed g,
                                     long long h)
{
  *d = a + b + c + e + f.c[1] + g.d + h;
}
extern "C" __global__ void img_big(big s, unsigned long long *o) { *o = s.v[3]; }
extern "C" __global__ void img_unused(int a, int b, int c) {}
extern "C" __global__ void img_vec4(char a, vec4 b, int *o) { *o = a + b.v.x; }
extern "C" __global__ void img_huge(huge h, int *o) { *o = h.c[5]; }
extern "C" __global__ void img_many(int a0, int a1, int a2, int a3, int a4, int a5, int a6, int a7,
                                    int a8, int a9, int a10, int a11, int a12, int a13, int a14,
                                    int a15, int a16, int a17, int a18, int a19, int *o)
{
  *o = a0 + a19;
}
template <typename T> __global__ void img_tmpl(T *p, T v, int n) { p[n] = v; }
template __global__ void img_tmpl<float>(float *, float, int);
template __global__ void img_tmpl<double>(double *, double, int);
