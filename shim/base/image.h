/* Kernel parameter layouts read from the images the program loads (fat binaries, cubins, PTX),
 * so that layout.c can ask the driver about exactly the parameters that exist: probing one past
 * the last fails, and debuggers list that failing call as the program's error. Pure C (no
 * cuda.h): the unit tests feed it images built by nvcc, truncated and mutated. */
#ifndef CG_SHIM_IMAGE_H
#define CG_SHIM_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CG_IMAGE_MAX_PARAMS 4096

/* One kernel found in an image: its name (not NUL-terminated, valid during the callback) and
 * its parameters' offsets and sizes by ordinal. */
struct cg_image_kernel {
	const char *name;
	size_t len;
	uint32_t n;
	const uint32_t *off, *size;
};
typedef void (*cg_image_fn)(void *arg, const struct cg_image_kernel *k);

/* Calls fn for each kernel whose layout the image states in a form understood here. `image` is
 * what cuModuleLoadData and friends take: a fat binary (bare, or in its wrapper struct), an ELF
 * cubin, or NUL-terminated PTX. No byte at or past image + limit is read (SIZE_MAX: bounded by
 * the image's own headers, for images the driver has just accepted). Compressed entries are
 * decoded (LZ4; zstd with the system's libzstd) and only those the device may use: want_sm (called once, if an entry is
 * compressed; NULL or 0: any) says its architecture (90: sm_90). Never writes to the image.
 * Returns how many kernels were reported, -1 when the image is not understood (nothing was
 * reported from a container whose framing is not understood). */
typedef unsigned (*cg_image_sm_fn)(void);
int cg_image_scan(const void *image, size_t limit, cg_image_sm_fn want_sm, cg_image_fn fn, void *arg);

/* LZ4 block format: decodes src into exactly dst_len bytes; false on anything malformed. */
bool cg_image_lz4(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len);
/* Whether zstd entries can be decoded (the system's libzstd.so.1 was found). */
bool cg_image_zstd_available(void);

/* A fingerprint of a layout (offsets and sizes by ordinal), to compare with the driver's. */
uint64_t cg_image_fingerprint(uint32_t n, const uint32_t *off, const uint32_t *size);

/* The process-wide table: (owner, kernel name) -> parameter count and fingerprint, where the
 * owner is the CUmodule or CUlibrary the image was loaded as. A name that the image states twice
 * with different layouts is ambiguous and answers nothing. */
/* Records the kernels of an image just loaded as `owner` (replacing what `owner` had); returns
 * how many the image stated (the same name in several entries counts each time), -1: none kept. */
int cg_image_record(uintptr_t owner, const void *image, size_t limit, cg_image_sm_fn want_sm);
/* The module or library `owner` is gone: its handle may be reused. */
void cg_image_forget(uintptr_t owner);
/* The parameter count of kernel `name` of `owner` (and its fingerprint), or -1: unknown. */
int cg_image_params(uintptr_t owner, const char *name, uint64_t *fingerprint);

#endif
