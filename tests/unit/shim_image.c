/* Parameter layouts read from module images (shim/base/image.c), on images nvcc built from
 * tests/unit/image_kernels.cu: an sm_90 cubin, PTX, and multi-architecture fat binaries as nvcc
 * writes them by default (cubins plain, PTX zstd), with every entry LZ4, with every entry zstd,
 * and uncompressed. Each layout must be the signature's; truncated and mutated images must give
 * the right count or none, never a wrong one.
 * usage: unit-shim_image CUBIN PTX FATBIN FATBIN_LZ4 FATBIN_ZSTD FATBIN_PLAIN (no arguments:
 * skipped, nvcc was not found) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "shim/base/image.h"
#include "tests/unit/rng.h"

/* The kernels' parameters as the C++ ABI lays them out: offset/size pairs by ordinal. */
static const struct expect {
	const char *name;
	uint32_t n;
	uint32_t layout[21][2];
} kernels[] = {
	{ "img_none", 0, { { 0 } } },
	{ "img_one", 1, { { 0, 8 } } },
	{ "img_mixed", 8, { { 0, 1 }, { 8, 8 }, { 16, 2 }, { 24, 8 }, { 32, 4 }, { 36, 3 }, { 40, 24 }, { 64, 8 } } },
	{ "img_big", 2, { { 0, 512 }, { 512, 8 } } },
	{ "img_unused", 3, { { 0, 4 }, { 4, 4 }, { 8, 4 } } },
	{ "img_vec4", 3, { { 0, 1 }, { 16, 16 }, { 32, 8 } } },
	{ "img_huge", 2, { { 0, 20000 }, { 20000, 8 } } },
	{ "img_many", 21, { { 0, 4 }, { 4, 4 }, { 8, 4 }, { 12, 4 }, { 16, 4 }, { 20, 4 }, { 24, 4 },
	                    { 28, 4 }, { 32, 4 }, { 36, 4 }, { 40, 4 }, { 44, 4 }, { 48, 4 }, { 52, 4 },
	                    { 56, 4 }, { 60, 4 }, { 64, 4 }, { 68, 4 }, { 72, 4 }, { 76, 4 }, { 80, 8 } } },
	{ "_Z8img_tmplIfEvPT_S0_i", 3, { { 0, 8 }, { 8, 4 }, { 12, 4 } } },
	{ "_Z8img_tmplIdEvPT_S0_i", 3, { { 0, 8 }, { 8, 8 }, { 16, 4 } } },
};
#define NKERNELS (sizeof(kernels) / sizeof(kernels[0]))

enum { CUBIN, PTX, FATBIN, FATBIN_LZ4, FATBIN_ZSTD, FATBIN_PLAIN, NIMAGES };
static const char *const image_name[NIMAGES] = { "cubin", "ptx", "fatbin", "fatbin-lz4",
                                                 "fatbin-zstd", "fatbin-plain" };
static struct { uint8_t *p; size_t n; } images[NIMAGES];

static const struct expect *expected(const char *name, size_t len)
{
	for (size_t i = 0; i < NKERNELS; i++)
		if (strlen(kernels[i].name) == len && memcmp(kernels[i].name, name, len) == 0)
			return &kernels[i];
	return NULL;
}

static uint64_t expected_fingerprint(const struct expect *e)
{
	uint32_t off[21], size[21];
	for (uint32_t i = 0; i < e->n; i++) {
		off[i] = e->layout[i][0];
		size[i] = e->layout[i][1];
	}
	return cg_image_fingerprint(e->n, off, size);
}

struct seen { unsigned times[NKERNELS]; const char *image; };

/* Every kernel reported is one of image_kernels.cu with its exact layout. */
static void check_exact(void *arg, const struct cg_image_kernel *k)
{
	struct seen *s = arg;
	const struct expect *e = expected(k->name, k->len);
	if (!e)
		fail_msg("%s: unknown kernel %.*s", s->image, (int)k->len, k->name);
	s->times[e - kernels]++;
	assert_int_equal(k->n, e->n);
	for (uint32_t i = 0; i < e->n; i++) {
		if (k->off[i] != e->layout[i][0] || k->size[i] != e->layout[i][1])
			fail_msg("%s: %s parameter %u at %u size %u, expected %u size %u", s->image, e->name, i,
			         k->off[i], k->size[i], e->layout[i][0], e->layout[i][1]);
	}
}

static uint8_t *copy(const uint8_t *p, size_t n)
{
	uint8_t *c = malloc(n ? n : 1); /* exactly n bytes: the sanitizers see any read past them */
	assert_non_null(c);
	memcpy(c, p, n);
	return c;
}

/* Entries of nvcc's default fat binary that state each kernel: two plain cubins, and its
 * zstd-compressed PTX where libzstd decodes it. */
static unsigned default_fatbin_entries(void)
{
	return cg_image_zstd_available() ? 3 : 2;
}

static void test_images(void **state)
{
	(void)state;
	for (int i = 0; i < NIMAGES; i++) {
		/* Exact size, and unbounded (headers only) as the shim reads what the driver accepted. */
		for (int bounded = 0; bounded < 2; bounded++) {
			struct seen s = { .image = image_name[i] };
			uint8_t *c = copy(images[i].p, images[i].n);
			int r = cg_image_scan(c, bounded ? images[i].n : SIZE_MAX, NULL, check_exact, &s);
			free(c);
			if (i == FATBIN_ZSTD && !cg_image_zstd_available()) {
				/* without libzstd, zstd entries are not decoded: nothing read, nothing wrong */
				assert_int_equal(r, 0);
				continue;
			}
			for (size_t k = 0; k < NKERNELS; k++)
				if (!s.times[k])
					fail_msg("%s: %s not found", image_name[i], kernels[k].name);
			/* Multi-architecture fat binaries state each kernel in every entry. */
			unsigned per_kernel = i == FATBIN ? default_fatbin_entries()
			                    : i == FATBIN_LZ4 || i == FATBIN_PLAIN || i == FATBIN_ZSTD ? 3 : 1;
			assert_int_equal(r, (int)(NKERNELS * per_kernel));
		}
	}
}

/* The runtime registers fat binaries in a wrapper: magic, version, pointer to the container. */
static void test_wrapper(void **state)
{
	(void)state;
	struct { uint32_t magic, version; const void *data, *unused; } w = {
		0x466243B1, 1, images[FATBIN].p, NULL
	};
	struct seen s = { .image = "wrapper" };
	assert_int_equal(cg_image_scan(&w, sizeof(w), NULL, check_exact, &s),
	                 (int)(NKERNELS * default_fatbin_entries()));
	w.version = 3;
	assert_int_equal(cg_image_scan(&w, sizeof(w), NULL, check_exact, &s), -1);
	/* Another binary format (the old fat binary magic): only its first bytes are read. */
	uint8_t *old = copy((const uint8_t *)"\x01\x5a\xe5\x1e", 4);
	assert_int_equal(cg_image_scan(old, SIZE_MAX, NULL, check_exact, &s), -1);
	free(old);
}

static unsigned sm_asked;
static unsigned sm_75(void) { sm_asked++; return 75; }
static unsigned sm_90(void) { sm_asked++; return 90; }

/* A compressed entry for another architecture than the device's is not decoded; the device is
 * asked once, and only for images with compressed entries. */
static void test_wanted_arch(void **state)
{
	(void)state;
	struct seen s = { .image = "fatbin-lz4 for sm_75" };
	assert_int_equal(cg_image_scan(images[FATBIN_LZ4].p, images[FATBIN_LZ4].n, sm_75, check_exact, &s), 0);
	assert_int_equal(sm_asked, 1);
	struct seen s90 = { .image = "fatbin-lz4 for sm_90" };
	/* sm_90 cubin and compute_90 PTX; not the sm_80 cubin */
	assert_int_equal(cg_image_scan(images[FATBIN_LZ4].p, images[FATBIN_LZ4].n, sm_90, check_exact, &s90),
	                 (int)NKERNELS * 2);
	assert_int_equal(sm_asked, 2);
	struct seen plain = { .image = "fatbin-plain for sm_90" };
	assert_int_equal(cg_image_scan(images[FATBIN_PLAIN].p, images[FATBIN_PLAIN].n, sm_90, check_exact, &plain),
	                 (int)NKERNELS * 3);
	assert_int_equal(sm_asked, 2);
}

static void test_lz4(void **state)
{
	(void)state;
	uint8_t out[8];
	static const uint8_t repeat[] = { 0x10, 'a', 0x01, 0x00 }; /* 'a', then 4 more from 1 back */
	assert_true(cg_image_lz4(repeat, sizeof(repeat), out, 5));
	assert_memory_equal(out, "aaaaa", 5);
	assert_false(cg_image_lz4(repeat, sizeof(repeat), out, 4)); /* longer than said */
	assert_false(cg_image_lz4(repeat, sizeof(repeat), out, 6)); /* shorter than said */
	static const uint8_t far[] = { 0x10, 'a', 0x02, 0x00 };     /* before the start */
	assert_false(cg_image_lz4(far, sizeof(far), out, 5));
	static const uint8_t cut[] = { 0xf0, 0xff };                /* a length running off the end */
	assert_false(cg_image_lz4(cut, sizeof(cut), out, 8));
}

/* The table answers per owner; a name stated twice differently answers nothing. */
static void test_table(void **state)
{
	(void)state;
	uint64_t fp = 0;
	cg_image_record(0x1000, images[FATBIN].p, images[FATBIN].n, NULL);
	for (size_t k = 0; k < NKERNELS; k++) {
		assert_int_equal(cg_image_params(0x1000, kernels[k].name, &fp), (int)kernels[k].n);
		assert_true(fp == expected_fingerprint(&kernels[k]));
		assert_int_equal(cg_image_params(0x2000, kernels[k].name, &fp), -1);
	}
	static const char two[] =
		".version 8.0\n.target sm_80\n.address_size 64\n"
		".visible .entry same(.param .u64 same_param_0, .param .u32 same_param_1)\n{ ret; }\n"
		".visible .entry same(.param .u64 same_param_0, .param .u32 same_param_1)\n{ ret; }\n"
		"// a comment with .entry img_one(\n"
		".visible .entry dup(.param .u64 dup_param_0)\n{ ret; }\n"
		".visible .entry dup(.param .u64 dup_param_0, .param .u64 dup_param_1)\n{ ret; }\n"
		".entry bare\n{ ret; }\n"
		".entry odd(.param .texref odd_param_0)\n{ ret; }\n"
		".entry named(.param .u64 a)\n{ ret; }\n"
		".entry cut(.param .u64 cut_param_0) .param .u64 cut_param_1)\n{ ret; }\n"
		".extern .entry decl(.param .u64 decl_param_0);\n"
		".entry ptr(.param .u64 .ptr .global .align 16 ptr_param_0, .param .align 4 .b8 ptr_param_1[12])\n"
		".maxntid 128, 1, 1\n{ ret; }\n";
	cg_image_record(0x2000, two, sizeof(two), NULL);
	assert_int_equal(cg_image_params(0x2000, "same", NULL), 2);
	assert_int_equal(cg_image_params(0x2000, "dup", NULL), -1);
	assert_int_equal(cg_image_params(0x2000, "bare", NULL), 0);
	assert_int_equal(cg_image_params(0x2000, "odd", NULL), -1);
	assert_int_equal(cg_image_params(0x2000, "img_one", NULL), -1);
	assert_int_equal(cg_image_params(0x2000, "named", NULL), -1); /* not nvcc's or LLVM's names */
	assert_int_equal(cg_image_params(0x2000, "cut", NULL), -1);
	assert_int_equal(cg_image_params(0x2000, "decl", NULL), -1);  /* declared, not defined */
	assert_int_equal(cg_image_params(0x2000, "ptr", &fp), 2);
	assert_true(fp == cg_image_fingerprint(2, (const uint32_t[]){ 0, 8 }, (const uint32_t[]){ 8, 12 }));
	/* The other owner is untouched; a forgotten one answers nothing; a reload replaces. */
	assert_int_equal(cg_image_params(0x1000, "img_one", NULL), 1);
	cg_image_forget(0x1000);
	assert_int_equal(cg_image_params(0x1000, "img_one", NULL), -1);
	assert_int_equal(cg_image_params(0x2000, "same", NULL), 2);
	cg_image_record(0x2000, images[CUBIN].p, images[CUBIN].n, NULL);
	assert_int_equal(cg_image_params(0x2000, "same", NULL), -1);
	assert_int_equal(cg_image_params(0x2000, "img_mixed", NULL), 8);
	cg_image_forget(0x2000);
}

/* What the table answers for image c: each kernel's right count, or nothing. A failing image is
 * kept in shim_image-failure.bin. */
static void check_table(const char *what, size_t trial, const uint8_t *c, size_t len)
{
	for (size_t k = 0; k < NKERNELS; k++) {
		int n = cg_image_params(0x3000, kernels[k].name, NULL);
		if (n != -1 && n != (int)kernels[k].n) {
			FILE *f = fopen("shim_image-failure.bin", "wb");
			if (f) {
				fwrite(c, 1, len, f);
				fclose(f);
			}
			fail_msg("%s (trial %zu): %s has %d parameters, not %u", what, trial, kernels[k].name, n,
			         kernels[k].n);
		}
	}
}

static void test_truncated(void **state)
{
	(void)state;
	for (int i = 0; i < NIMAGES; i++) {
		size_t step = images[i].n / 3000 + 1;
		for (size_t len = 1; len < images[i].n; len += step) {
			uint8_t *c = copy(images[i].p, len);
			cg_image_record(0x3000, c, len, NULL);
			check_table(image_name[i], len, c, len);
			free(c);
		}
	}
	cg_image_forget(0x3000);
}

/* Random bytes changed in the binary images (PTX changed is other PTX, not a broken image).
 * SHIM_IMAGE_TRIALS and SHIM_IMAGE_SEED make a longer or another run. */
static void test_mutated(void **state)
{
	(void)state;
	const char *trials_env = getenv("SHIM_IMAGE_TRIALS"), *seed_env = getenv("SHIM_IMAGE_SEED");
	size_t trials = trials_env ? strtoul(trials_env, NULL, 0) : 3000;
	struct rng r = { seed_env ? strtoull(seed_env, NULL, 0) | 1 : 0x5eed1234abcdULL };
	for (int i = 0; i < NIMAGES; i++) {
		if (i == PTX)
			continue;
		for (size_t trial = 0; trial < trials; trial++) {
			uint8_t *c = copy(images[i].p, images[i].n);
			for (unsigned m = 1 + below(&r, 4); m > 0; m--) {
				size_t at = below(&r, (uint32_t)images[i].n);
				uint32_t how = below(&r, 4);
				c[at] = how == 0 ? 0 : how == 1 ? 0xff : how == 2 ? (uint8_t)(c[at] + 1) : (uint8_t)rnd(&r);
			}
			cg_image_record(0x3000, c, images[i].n, NULL);
			check_table(image_name[i], trial, c, images[i].n);
			free(c);
		}
	}
	cg_image_forget(0x3000);
}

static void load(int i, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) != 0) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	long n = ftell(f);
	images[i].p = malloc((size_t)n + 1);
	if (!images[i].p || fseek(f, 0, SEEK_SET) != 0 || fread(images[i].p, 1, (size_t)n, f) != (size_t)n)
		exit(1);
	images[i].p[n] = 0;
	/* PTX as the driver takes it: with its terminating NUL */
	images[i].n = (size_t)n + (i == PTX);
	fclose(f);
}

int main(int argc, char **argv)
{
	if (argc != 1 + NIMAGES) {
		fprintf(stderr, "no images (nvcc not found): skipped\n");
		return 77;
	}
	for (int i = 0; i < NIMAGES; i++)
		load(i, argv[1 + i]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_images),
		cmocka_unit_test(test_wrapper),
		cmocka_unit_test(test_wanted_arch),
		cmocka_unit_test(test_lz4),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_mutated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
