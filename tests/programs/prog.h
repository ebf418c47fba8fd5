/* Helpers shared by the driver-API test programs: checked calls that name the failing call and
 * exit 1, driver/context/module setup (exit 77, "skipped", when there is no device) and an
 * order-sensitive checksum. */
#pragma once
#include <cuda.h>
#include <stddef.h>

extern const char kernels_ptx[];  /* kernels.cu as PTX, or "" without nvcc */

#define CK(call) prog_check((call), #call, __FILE__, __LINE__)
void prog_check(CUresult r, const char *what, const char *file, int line);

/* cuInit, device 0, its primary context retained and made current. */
CUcontext prog_init(void);
/* The same on device `ordinal` modulo the device count (one rank per GPU). */
CUcontext prog_init_device(int ordinal);
CUmodule prog_module(void);
/* The image of `--image FILE` (a fat binary, cubin or PTX built from kernels.cu), else kernels_ptx. */
const void *prog_image(int argc, char **argv);
CUfunction prog_fn(CUmodule m, const char *name);

/* FNV-1a style mixing: any reordering, loss or duplication of inputs changes the result. */
unsigned long long prog_mix(unsigned long long h, unsigned long long v);
unsigned long long prog_mix_bytes(unsigned long long h, const void *p, size_t n);
/* Reads n bytes of device memory (synchronously) into the checksum. */
unsigned long long prog_mix_device(unsigned long long h, CUdeviceptr p, size_t n);

/* Value of `--name VALUE` in argv, or NULL. */
const char *prog_opt(int argc, char **argv, const char *name);
/* `--name` present in argv. */
int prog_flag(int argc, char **argv, const char *name);
/* `--iters N`, or `def`. */
int prog_iters(int argc, char **argv, int def);
/* Launch over n elements (256-thread blocks; one thread when n <= 0), parameters given. */
void prog_launch(CUfunction f, int n, CUstream s, void **params);
