/* Parameter layouts read from module images (image.h): the fat binary container, ELF cubins'
 * .nv.info.<kernel> attributes, PTX .entry declarations, LZ4- and zstd-compressed entries; and the table
 * of what was read, by module. Everything read is bounds-checked against the image's own
 * headers; anything not understood is left out, and the driver is then probed as before. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"

/* Bounds for images whose size only their headers tell (the driver accepted them): no single
 * container, cubin or PTX text is larger in practice; more is taken as garbage. */
#define MAX_IMAGE (1ULL << 30)
/* Decoded bytes one scan may produce (LZ4 entries of the wanted architecture). */
#define DECODE_BUDGET (64u << 20)

#define FATBIN_WRAPPER_MAGIC 0x466243B1u /* __fatBinC_Wrapper_t: magic, version, data, ... */
#define FATBIN_MAGIC 0xBA55ED50u
#define ENTRY_PTX 1
#define ENTRY_CUBIN 2
#define ENTRY_VERSION 0x0101
#define ENTRY_LZ4 0x2000
#define ENTRY_ZSTD 0x8000
#define EM_CUDA 190
#define SHT_CUDA_INFO 0x70000000u
/* .nv.info attribute records: format byte, attribute byte, then a 16-bit value (formats 1-3)
 * or a 16-bit length and that many bytes (format 4). */
#define EIFMT_SVAL 4
#define EIATTR_PARAM_CBANK 0x0a      /* symbol, offset, size of the parameter bank */
#define EIATTR_KPARAM_INFO 0x17      /* index, ordinal, offset, flags (size in bits 18-31) */
#define EIATTR_CBANK_PARAM_SIZE 0x19 /* size of the parameters */
#define EIATTR_KPARAM_INFO_V2 0x45   /* parameters past 4 KiB: index, ordinal, offset, size */

static uint16_t rd16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

struct scan {
	cg_image_sm_fn want_sm;
	unsigned sm;   /* want_sm's answer, once asked */
	bool sm_known;
	cg_image_fn fn;
	void *arg;
	int found;
	size_t budget;
	/* scratch for one kernel */
	uint32_t off[CG_IMAGE_MAX_PARAMS], size[CG_IMAGE_MAX_PARAMS];
	uint8_t seen[CG_IMAGE_MAX_PARAMS];
};

static void report(struct scan *s, const char *name, size_t len, uint32_t n)
{
	struct cg_image_kernel k = { name, len, n, s->off, s->size };
	s->fn(s->arg, &k);
	s->found++;
}

/* --- cubins ------------------------------------------------------------------------------- */
/* The attributes of one kernel: its parameters are the KPARAM_INFO records, whose ordinals must
 * be 0..n-1 once each, in increasing non-overlapping offsets that end where the parameter bank
 * says the parameters end. Any other shape: not understood (false). */
struct kinfo {
	uint32_t n, end;
	bool has_bank;
	uint32_t bank_off; /* where the parameters start in constant bank 0 */
};

/* What a kernel's attributes say of its parameters, as they are read. */
struct kattrs {
	uint32_t n, max_ord;   /* parameters read, the largest ordinal among them */
	bool has_cb;
	uint32_t cb_size;      /* EIATTR_CBANK_PARAM_SIZE */
	uint32_t bank_size;    /* the parameters' size in the EIATTR_PARAM_CBANK record */
};

/* One parameter's record (EIATTR_KPARAM_INFO or _V2, 12 bytes) into s; false when malformed or
 * its ordinal came before. */
static bool param_record(struct scan *s, uint8_t attr, const uint8_t *body, uint16_t val,
                         struct kattrs *a)
{
	if (val != 12)
		return false;
	uint32_t ord = rd16(body + 4), off = rd16(body + 6), size = rd32(body + 8);
	size = attr == EIATTR_KPARAM_INFO ? size >> 18 : size;
	if (rd32(body) != 0 || ord >= CG_IMAGE_MAX_PARAMS || s->seen[ord] || size == 0 ||
	    size > 1u << 20)
		return false;
	s->seen[ord] = 1;
	s->off[ord] = off;
	s->size[ord] = size;
	a->max_ord = ord > a->max_ord ? ord : a->max_ord;
	a->n++;
	return true;
}

/* The parameters read are ordinals 0..n-1 at increasing, non-overlapping offsets, and both sizes
 * stated say where they end (none: neither says there are any); then their count and end. */
static bool params_agree(const struct scan *s, const struct kattrs *a, struct kinfo *ki)
{
	uint32_t n = a->n;
	if (n && a->max_ord != n - 1)
		return false;
	uint32_t end = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (s->off[i] < end)
			return false;
		end = s->off[i] + s->size[i];
	}
	if (n ? !a->has_cb || a->cb_size != end || !ki->has_bank || a->bank_size != end
	      : (a->has_cb && a->cb_size != 0) || (ki->has_bank && a->bank_size != 0))
		return false;
	ki->n = n;
	ki->end = end;
	return true;
}

static bool kernel_info(struct scan *s, const uint8_t *d, uint64_t len, struct kinfo *ki)
{
	struct kattrs a = { 0 };
	*ki = (struct kinfo){ 0 };
	memset(s->seen, 0, sizeof(s->seen));
	for (uint64_t pos = 0; pos < len;) {
		if (len - pos < 4)
			return false;
		uint8_t fmt = d[pos], attr = d[pos + 1];
		uint16_t val = rd16(d + pos + 2);
		if (fmt == 0 || fmt > EIFMT_SVAL)
			return false;
		if (fmt < EIFMT_SVAL) {
			if (attr == EIATTR_CBANK_PARAM_SIZE) {
				if (a.has_cb)
					return false;
				a.has_cb = true;
				a.cb_size = val;
			}
			pos += 4;
			continue;
		}
		if (val > len - pos - 4)
			return false;
		const uint8_t *body = d + pos + 4;
		if (attr == EIATTR_KPARAM_INFO || attr == EIATTR_KPARAM_INFO_V2) {
			if (!param_record(s, attr, body, val, &a))
				return false;
		} else if (attr == EIATTR_PARAM_CBANK) {
			if (val != 8 || ki->has_bank)
				return false;
			ki->has_bank = true;
			ki->bank_off = rd16(body + 4);
			a.bank_size = rd16(body + 6);
		}
		pos += 4 + (uint64_t)val;
	}
	return params_agree(s, &a, ki);
}

struct elf {
	const uint8_t *p;
	uint64_t size, shoff, strtab, strsize;
	uint32_t shnum;
};

static const uint8_t *section(const struct elf *e, uint32_t i)
{
	return e->p + e->shoff + (uint64_t)i * 64;
}

/* Section i's name (NUL-terminated inside the string table), or NULL. */
static const char *section_name(const struct elf *e, uint32_t i)
{
	uint32_t at = rd32(section(e, i));
	if (at >= e->strsize)
		return NULL;
	const char *s = (const char *)e->p + e->strtab + at;
	return memchr(s, 0, e->strsize - at) ? s : NULL;
}

/* Section i's contents within the image, or false. */
static bool section_data(const struct elf *e, uint32_t i, uint64_t *off, uint64_t *len)
{
	const uint8_t *h = section(e, i);
	*off = rd64(h + 0x18);
	*len = rd64(h + 0x20);
	return *off <= e->size && *len <= e->size - *off;
}

/* The cubin's header and section table checked, and where it ends: the sections' end where the
 * caller does not know its size (limit SIZE_MAX). false: not a cubin we understand. */
static bool elf_open(struct elf *e, const uint8_t *p, uint64_t limit)
{
	static const uint8_t ident[] = { 0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little-endian */ };
	if (limit < 64 || memcmp(p, ident, sizeof(ident)) != 0 || rd16(p + 18) != EM_CUDA)
		return false;
	*e = (struct elf){ .p = p, .shoff = rd64(p + 0x28), .shnum = rd16(p + 0x3c) };
	uint32_t shstrndx = rd16(p + 0x3e);
	if (rd16(p + 0x3a) != 64 || e->shnum == 0 || shstrndx >= e->shnum)
		return false;
	/* The section headers end the file as nvcc writes it; the image's size is no less. */
	e->size = limit < MAX_IMAGE ? limit : MAX_IMAGE;
	if (e->shoff > e->size || (uint64_t)e->shnum * 64 > e->size - e->shoff)
		return false;
	if (limit == SIZE_MAX) {
		uint64_t end = e->shoff + (uint64_t)e->shnum * 64;
		for (uint32_t i = 0; i < e->shnum; i++) {
			const uint8_t *h = section(e, i);
			uint64_t off = rd64(h + 0x18), len = rd64(h + 0x20);
			if (rd32(h + 4) == 8 /* SHT_NOBITS */)
				continue;
			if (off > MAX_IMAGE || len > MAX_IMAGE - off)
				return false;
			end = off + len > end ? off + len : end;
		}
		e->size = end;
	}
	return section_data(e, shstrndx, &e->strtab, &e->strsize);
}

/* Each kernel's constant bank 0 (.nv.constant0.<kernel>, linked to its code like its
 * attributes) is the bank's reserved start, the same for every kernel of the cubin, and the
 * parameters: its size confirms the parameters' end, also that there are none, where a cut
 * attribute section would look the same. By code section: its bank's section + 1, else 0;
 * NULL when out of memory. */
static uint32_t *banks_of(const struct elf *e)
{
	uint32_t *bank0 = calloc(e->shnum, sizeof(*bank0));
	if (!bank0)
		return NULL;
	for (uint32_t i = 0; i < e->shnum; i++) {
		const char *name = section_name(e, i), *tname;
		uint32_t text = rd32(section(e, i) + 0x2c);
		if (name && strncmp(name, ".nv.constant0.", 14) == 0 && text < e->shnum &&
		    (tname = section_name(e, text)) && strncmp(tname, ".text.", 6) == 0 &&
		    strcmp(tname + 6, name + 14) == 0)
			bank0[text] = i + 1;
	}
	return bank0;
}

/* Attribute section i (.nv.info.<kernel>) read into ki, with its code section (`text`); false
 * when it is none or not understood. */
static bool kernel_section(struct scan *s, const struct elf *e, uint32_t i, uint32_t *text,
                           struct kinfo *ki)
{
	const char *name = section_name(e, i);
	const uint8_t *h = section(e, i);
	if (!name || strncmp(name, ".nv.info.", 9) != 0 || !name[9] || rd32(h + 4) != SHT_CUDA_INFO)
		return false;
	/* The attributes belong to the code section sh_info names: .text.<the same kernel>. */
	*text = rd32(h + 0x2c);
	const char *tname = *text < e->shnum ? section_name(e, *text) : NULL;
	uint64_t off, len;
	return tname && strncmp(tname, ".text.", 6) == 0 && strcmp(tname + 6, name + 9) == 0 &&
	       section_data(e, i, &off, &len) && kernel_info(s, e->p + off, len, ki);
}

static int scan_elf(struct scan *s, const uint8_t *p, uint64_t limit)
{
	struct elf e;
	if (!elf_open(&e, p, limit))
		return -1;
	uint32_t *bank0 = banks_of(&e);
	if (!bank0)
		return -1;
	int before = s->found;
	enum { UNKNOWN = -1 };
	int64_t base = UNKNOWN; /* the reserved start: where the smallest parameter banks begin */
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < e.shnum; i++) {
			uint32_t text;
			struct kinfo ki;
			uint64_t boff, blen;
			if (!kernel_section(s, &e, i, &text, &ki))
				continue;
			if (pass == 0) {
				/* Kernels with large parameters (over 4 KiB) have them further up. */
				if (ki.has_bank && (base == UNKNOWN || ki.bank_off < base))
					base = ki.bank_off;
				continue;
			}
			int64_t start = ki.has_bank ? ki.bank_off : base;
			if (start < 0 || !bank0[text] || !section_data(&e, bank0[text] - 1, &boff, &blen) ||
			    blen != (uint64_t)start + ki.end)
				continue;
			const char *name = section_name(&e, i) + 9;
			report(s, name, strlen(name), ki.n);
		}
	}
	free(bank0);
	return s->found - before;
}

/* --- PTX ---------------------------------------------------------------------------------- */
struct text {
	const char *p;
	size_t n, i;
};

/* Skips blanks, comments and quoted strings (a file name may hold anything). */
static void skip(struct text *t)
{
	while (t->i < t->n) {
		char c = t->p[t->i];
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			t->i++;
		} else if (c == '/' && t->i + 1 < t->n && t->p[t->i + 1] == '/') {
			while (t->i < t->n && t->p[t->i] != '\n')
				t->i++;
		} else if (c == '/' && t->i + 1 < t->n && t->p[t->i + 1] == '*') {
			t->i += 2;
			while (t->i + 1 < t->n && !(t->p[t->i] == '*' && t->p[t->i + 1] == '/'))
				t->i++;
			t->i = t->i + 2 < t->n ? t->i + 2 : t->n;
		} else {
			return;
		}
	}
}

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '$' || c == '%' || c == '.';
}

/* The next token: an identifier or directive (maybe starting with '.'), a number, or one
 * character. Returns its length (0 at the end). */
static size_t token(struct text *t, const char **tok)
{
	skip(t);
	*tok = t->p + t->i;
	size_t start = t->i;
	if (t->i < t->n && ident_char(t->p[t->i])) {
		t->i++;
		while (t->i < t->n && ident_char(t->p[t->i]) && t->p[t->i] != '.')
			t->i++;
	} else if (t->i < t->n) {
		t->i++;
	}
	return t->i - start;
}

static bool is(const char *tok, size_t len, const char *word)
{
	return len == strlen(word) && memcmp(tok, word, len) == 0;
}

static uint32_t number(const char *tok, size_t len, bool *ok)
{
	uint64_t v = 0;
	*ok = len > 0 && len <= 9;
	for (size_t i = 0; *ok && i < len; i++) {
		*ok = tok[i] >= '0' && tok[i] <= '9';
		v = v * 10 + (uint64_t)(tok[i] - '0');
	}
	return (uint32_t)v;
}

static uint32_t type_size(const char *tok, size_t len)
{
	static const struct { const char *name; uint32_t size; } types[] = {
		{ ".b8", 1 }, { ".u8", 1 }, { ".s8", 1 },
		{ ".b16", 2 }, { ".u16", 2 }, { ".s16", 2 }, { ".f16", 2 }, { ".bf16", 2 },
		{ ".b32", 4 }, { ".u32", 4 }, { ".s32", 4 }, { ".f32", 4 }, { ".f16x2", 4 }, { ".bf16x2", 4 },
		{ ".b64", 8 }, { ".u64", 8 }, { ".s64", 8 }, { ".f64", 8 },
		{ ".b128", 16 },
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (is(tok, len, types[i].name))
			return types[i].size;
	return 0;
}

/* Whether tok is `<kernel>_param_<i>`, the name nvcc and LLVM give parameter i: other names (PTX
 * written by hand) are not read, so that a garbled list is not taken for a shorter one. */
static bool param_name(const char *tok, size_t len, const char *kernel, size_t klen, uint32_t i)
{
	char digits[12];
	size_t d = 0;
	do
		digits[d++] = (char)('0' + i % 10);
	while ((i /= 10) && d < sizeof(digits));
	if (len != klen + 7 + d || memcmp(tok, kernel, klen) != 0 || memcmp(tok + klen, "_param_", 7) != 0)
		return false;
	for (size_t k = 0; k < d; k++)
		if (tok[klen + 7 + k] != digits[d - 1 - k])
			return false;
	return true;
}

/* Parameter i, `.param [.align A] .type [.ptr ...] <kernel>_param_<i>[N]` of a kernel's list,
 * laid out after `*end`: aligned to A, else to the type's size (what ptxas does). False when not
 * understood. */
static bool ptx_param(struct text *t, const char *kernel, size_t klen, uint32_t i, uint32_t *off,
                      uint32_t *size, uint32_t *end)
{
	const char *tok;
	size_t len = token(t, &tok);
	uint32_t align = 0, elem = 0, count = 1;
	bool ok;
	if (!is(tok, len, ".param"))
		return false;
	len = token(t, &tok);
	if (is(tok, len, ".align")) {
		len = token(t, &tok);
		align = number(tok, len, &ok);
		if (!ok || !align || (align & (align - 1)) || align > 4096)
			return false;
		len = token(t, &tok);
	}
	elem = type_size(tok, len);
	if (!elem)
		return false;
	/* .ptr attributes (state space, the pointee's .align) say nothing of the layout. */
	for (len = token(t, &tok); len && tok[0] == '.'; len = token(t, &tok)) {
		if (is(tok, len, ".align")) {
			len = token(t, &tok);
			number(tok, len, &ok);
			if (!ok)
				return false;
		} else if (!is(tok, len, ".ptr") && !is(tok, len, ".global") && !is(tok, len, ".const") &&
		           !is(tok, len, ".local") && !is(tok, len, ".shared")) {
			return false;
		}
	}
	if (!param_name(tok, len, kernel, klen, i))
		return false;
	size_t save = t->i;
	len = token(t, &tok);
	if (is(tok, len, "[")) {
		len = token(t, &tok);
		count = number(tok, len, &ok);
		if (!ok || !count || (len = token(t, &tok), !is(tok, len, "]")))
			return false;
	} else {
		t->i = save;
	}
	if (!align)
		align = elem;
	uint64_t at = ((uint64_t)*end + align - 1) / align * align, bytes = (uint64_t)elem * count;
	if (at + bytes > 1u << 20)
		return false;
	*off = (uint32_t)at;
	*size = (uint32_t)bytes;
	*end = (uint32_t)(at + bytes);
	return true;
}

/* What may follow a kernel's parameter list (or its name, when it has none): its body or the
 * performance directives before it. Anything else is not PTX as understood here. */
static bool entry_follows(const char *tok, size_t len)
{
	static const char *const after[] = { "{", ".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm",
	                                     ".maxnreg", ".pragma", ".noreturn", ".explicitcluster",
	                                     ".reqnctapercluster", ".maxclusterrank", ".blocksareclusters" };
	for (size_t i = 0; i < sizeof(after) / sizeof(after[0]); i++)
		if (is(tok, len, after[i]))
			return true;
	return false;
}

/* The kernel's body (from `tok`, '{' or the directives before it, to its closing brace) names
 * no parameter past the list: a list cut short is not PTX the driver would have accepted. */
static bool body_fits(struct text *t, const char *tok, size_t len, const char *kernel, size_t klen,
                      uint32_t count)
{
	size_t save = t->i;
	int depth = 0;
	for (; len; len = token(t, &tok)) {
		if (is(tok, len, "{")) {
			depth++;
		} else if (is(tok, len, "}")) {
			if (--depth <= 0)
				break;
		} else if (len > klen + 7 && memcmp(tok, kernel, klen) == 0 &&
		           memcmp(tok + klen, "_param_", 7) == 0) {
			bool ok;
			uint32_t i = number(tok + klen + 7, len - klen - 7, &ok);
			if (!ok || i >= count)
				return false;
		}
	}
	t->i = save;
	return depth <= 0 && len;
}

static int scan_ptx(struct scan *s, const char *p, size_t limit)
{
	size_t n = 0;
	size_t cap = limit < MAX_IMAGE ? limit : MAX_IMAGE;
	const char *nul = memchr(p, 0, cap);
	if (!nul && limit == SIZE_MAX)
		return -1;
	n = nul ? (size_t)(nul - p) : cap;
	struct text t = { p, n, 0 };
	int before = s->found;
	for (;;) {
		const char *tok;
		size_t len = token(&t, &tok);
		if (!len)
			break;
		if (!is(tok, len, ".entry"))
			continue;
		const char *name;
		size_t nlen = token(&t, &name);
		if (!nlen || !ident_char(name[0]) || name[0] == '.')
			continue;
		len = token(&t, &tok);
		uint32_t count = 0, end = 0;
		bool ok = true;
		size_t save;
		if (is(tok, len, "(")) {
			save = t.i;
			len = token(&t, &tok);
			if (!is(tok, len, ")")) {
				t.i = save;
				for (;;) {
					if (count == CG_IMAGE_MAX_PARAMS ||
					    !ptx_param(&t, name, nlen, count, &s->off[count], &s->size[count], &end)) {
						ok = false;
						break;
					}
					count++;
					len = token(&t, &tok);
					if (is(tok, len, ")"))
						break;
					if (!is(tok, len, ",")) {
						ok = false;
						break;
					}
				}
			}
			if (ok)
				len = token(&t, &tok);
		}
		/* No list: `.entry name {` (or directives first), no parameters at all. */
		if (ok && entry_follows(tok, len) && body_fits(&t, tok, len, name, nlen, count))
			report(s, name, nlen, count);
	}
	return s->found - before;
}

/* --- fat binaries ------------------------------------------------------------------------- */
bool cg_image_lz4(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
	size_t ip = 0, op = 0;
	while (ip < src_len) {
		uint8_t tokn = src[ip++];
		size_t lit = tokn >> 4;
		if (lit == 15) {
			uint8_t b;
			do {
				if (ip >= src_len)
					return false;
				b = src[ip++];
				lit += b;
			} while (b == 255 && lit < dst_len);
		}
		if (lit > src_len - ip || lit > dst_len - op)
			return false;
		memcpy(dst + op, src + ip, lit);
		ip += lit;
		op += lit;
		if (ip == src_len)
			break; /* the last sequence has literals only */
		if (src_len - ip < 2)
			return false;
		size_t dist = (size_t)src[ip] | (size_t)src[ip + 1] << 8;
		ip += 2;
		if (dist == 0 || dist > op)
			return false;
		size_t match = tokn & 15;
		if (match == 15) {
			uint8_t b;
			do {
				if (ip >= src_len)
					return false;
				b = src[ip++];
				match += b;
			} while (b == 255 && match < dst_len);
		}
		match += 4;
		if (match > dst_len - op)
			return false;
		for (size_t i = 0; i < match; i++, op++)
			dst[op] = dst[op - dist]; /* overlapping copies repeat the pattern */
	}
	return op == dst_len;
}

static void scan_payload(struct scan *s, unsigned kind, const uint8_t *p, uint64_t len)
{
	if (kind == ENTRY_CUBIN)
		scan_elf(s, p, len);
	else
		scan_ptx(s, (const char *)p, len);
}

/* zstd entries (nvcc's default compression for PTX, for everything under -compress-all, and in
 * NVIDIA's own libraries) are standard zstd frames, decoded by the system's libzstd when it is
 * there: loaded at the first such entry, no build dependency. Without it they are skipped (their
 * kernels' layouts are then probed). */
typedef size_t (*zstd_decompress_fn)(void *dst, size_t cap, const void *src, size_t len);
typedef unsigned (*zstd_is_error_fn)(size_t code);
static _Atomic(zstd_decompress_fn) zstd_decompress;
static _Atomic(zstd_is_error_fn) zstd_is_error;
static pthread_once_t zstd_once = PTHREAD_ONCE_INIT;

static void zstd_load(void)
{
	void *lib = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
	zstd_is_error_fn err = lib ? (zstd_is_error_fn)dlsym(lib, "ZSTD_isError") : NULL;
	zstd_decompress_fn dec = err ? (zstd_decompress_fn)dlsym(lib, "ZSTD_decompress") : NULL;
	if (!dec) {
		if (lib)
			dlclose(lib);
		return;
	}
	atomic_store(&zstd_is_error, err);
	atomic_store(&zstd_decompress, dec);
}

/* Decodes one zstd frame of exactly dst_len bytes; false otherwise (or without libzstd). */
static bool zstd(const uint8_t *src, size_t src_len, uint8_t *dst, size_t dst_len)
{
	pthread_once(&zstd_once, zstd_load);
	zstd_decompress_fn dec = atomic_load(&zstd_decompress);
	if (!dec)
		return false;
	size_t r = dec(dst, dst_len, src, src_len);
	return !atomic_load(&zstd_is_error)(r) && r == dst_len;
}

bool cg_image_zstd_available(void)
{
	pthread_once(&zstd_once, zstd_load);
	return atomic_load(&zstd_decompress) != NULL;
}

/* Whether a compressed entry is worth decoding: one the driver may pick for the current device
 * (a cubin of the same major architecture, not newer; PTX not newer), or any when unknown. */
static bool wanted(struct scan *s, unsigned kind, unsigned sm)
{
	if (!s->sm_known) {
		s->sm = s->want_sm ? s->want_sm() : 0;
		s->sm_known = true;
	}
	if (!s->sm)
		return true;
	if (kind == ENTRY_CUBIN)
		return sm / 10 == s->sm / 10 && sm <= s->sm;
	return sm <= s->sm;
}

/* One container: 16-byte header (magic, version 1, header size, size of the entries), then
 * entries of a 64-byte or longer header (kind, version, header size, padded payload size,
 * payload size, ..., architecture, ..., flags, ..., decoded size) and their payload. */
static int scan_fatbin(struct scan *s, const uint8_t *p, uint64_t limit)
{
	if (limit < 16 || rd32(p) != FATBIN_MAGIC || rd16(p + 4) != 1)
		return -1;
	uint64_t hs = rd16(p + 6), size = rd64(p + 8);
	uint64_t cap = limit < MAX_IMAGE ? limit : MAX_IMAGE;
	if (hs < 16 || hs > cap || size > cap - hs)
		return -1;
	/* First the framing of every entry, so that nothing is reported from one not understood. */
	for (uint64_t e = hs, end = hs + size; e < end;) {
		if (end - e < 64)
			return -1;
		uint64_t ehs = rd32(p + e + 4), padded = rd64(p + e + 8);
		if (rd16(p + e + 2) != ENTRY_VERSION || ehs < 64 || ehs > end - e || padded > end - e - ehs)
			return -1;
		e += ehs + padded;
	}
	int before = s->found;
	for (uint64_t e = hs, end = hs + size; e < end;) {
		const uint8_t *h = p + e;
		unsigned kind = rd16(h);
		uint64_t ehs = rd32(h + 4), padded = rd64(h + 8), packed = rd32(h + 16);
		uint64_t flags = rd64(h + 0x28), decoded = rd64(h + 0x38);
		unsigned sm = rd32(h + 0x1c);
		const uint8_t *data = h + ehs;
		e += ehs + padded;
		if (kind != ENTRY_CUBIN && kind != ENTRY_PTX)
			continue;
		if (!(flags & (ENTRY_LZ4 | ENTRY_ZSTD))) {
			scan_payload(s, kind, data, padded);
			continue;
		}
		bool lz4 = flags & ENTRY_LZ4;
		if (lz4 == !!(flags & ENTRY_ZSTD) || packed > padded || decoded == 0 ||
		    decoded > s->budget || !wanted(s, kind, sm))
			continue;
		uint8_t *out = malloc(decoded + 1);
		if (!out)
			continue;
		s->budget -= decoded;
		if (lz4 ? cg_image_lz4(data, packed, out, decoded) : zstd(data, packed, out, decoded)) {
			out[decoded] = 0;
			scan_payload(s, kind, out, decoded + 1);
		}
		free(out);
	}
	return s->found - before;
}

/* PTX starts with text (a comment, a directive); a binary format of another magic does not, and
 * is not searched for a NUL that may lie beyond what the driver read. */
static bool looks_like_text(const uint8_t *p, size_t limit)
{
	for (size_t i = 0; i < 4; i++)
		if (i >= limit || p[i] > 126 || (p[i] < 32 && p[i] != '\n' && p[i] != '\r' && p[i] != '\t'))
			return false;
	return true;
}

int cg_image_scan(const void *image, size_t limit, cg_image_sm_fn want_sm, cg_image_fn fn, void *arg)
{
	const uint8_t *p = image;
	if (!p || limit < 4)
		return -1;
	struct scan *s = malloc(sizeof(*s));
	if (!s)
		return -1;
	s->want_sm = want_sm;
	s->sm_known = false;
	s->fn = fn;
	s->arg = arg;
	s->found = 0;
	s->budget = DECODE_BUDGET;
	int r;
	uint32_t magic = rd32(p);
	if (magic == FATBIN_WRAPPER_MAGIC) {
		/* The wrapper the runtime registers: the container is elsewhere, its size its own. */
		const uint8_t *data = NULL;
		uint32_t version = limit >= 16 ? rd32(p + 4) : 0;
		if (version == 1 || version == 2)
			memcpy(&data, p + 8, sizeof(data));
		r = data ? scan_fatbin(s, data, SIZE_MAX) : -1;
	} else if (magic == FATBIN_MAGIC) {
		r = scan_fatbin(s, p, limit);
	} else if (magic == 0x464c457f /* \x7fELF */) {
		r = scan_elf(s, p, limit);
	} else if (looks_like_text(p, limit)) {
		r = scan_ptx(s, (const char *)p, limit);
	} else {
		r = -1; /* another format: not searched for its end */
	}
	free(s);
	return r;
}

uint64_t cg_image_fingerprint(uint32_t n, const uint32_t *off, const uint32_t *size)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ n;
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ ((uint64_t)off[i] << 32 | size[i])) * 0x100000001b3ULL;
	return h;
}

/* --- the table ---------------------------------------------------------------------------- */
#define AMBIGUOUS UINT32_MAX

struct entry {
	uintptr_t owner; /* 0: free */
	uint64_t name;   /* hash of the name */
	uint64_t fp;
	uint32_t n;      /* or AMBIGUOUS */
};

static struct entry *table;
static size_t slots, used;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t name_hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ len;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
	return h ^ h >> 31;
}

static size_t slot_of(uintptr_t owner, uint64_t name)
{
	uint64_t x = (name ^ (uint64_t)owner * 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
	return (size_t)(x >> 32) & (slots - 1);
}

static struct entry *find(uintptr_t owner, uint64_t name)
{
	if (!slots)
		return NULL;
	for (size_t i = slot_of(owner, name);; i = (i + 1) & (slots - 1)) {
		if (!table[i].owner)
			return &table[i];
		if (table[i].owner == owner && table[i].name == name)
			return &table[i];
	}
}

/* Rebuilds the table with room for twice what it holds, without `drop`'s entries. */
static bool rebuild(size_t want, uintptr_t drop)
{
	size_t n = 1024;
	while (n < want * 2)
		n *= 2;
	struct entry *old = table, *t = calloc(n, sizeof(*t));
	size_t old_slots = slots;
	if (!t)
		return false;
	table = t;
	slots = n;
	used = 0;
	for (size_t i = 0; i < old_slots; i++) {
		if (!old[i].owner || old[i].owner == drop)
			continue;
		*find(old[i].owner, old[i].name) = old[i];
		used++;
	}
	free(old);
	return true;
}

static void forget_locked(uintptr_t owner)
{
	for (size_t i = 0; i < slots; i++) {
		if (table[i].owner != owner)
			continue;
		if (rebuild(used, owner))
			return;
		/* No memory for a smaller table: the entries stay, answering nothing. */
		for (; i < slots; i++)
			if (table[i].owner == owner)
				table[i].n = AMBIGUOUS;
		return;
	}
}

struct record { uintptr_t owner; bool failed; };

static void record_one(void *arg, const struct cg_image_kernel *k)
{
	struct record *r = arg;
	if (r->failed)
		return;
	if ((used + 1) * 2 > slots && !rebuild(used + 1, 0)) {
		r->failed = true;
		return;
	}
	uint64_t name = name_hash(k->name, k->len), fp = cg_image_fingerprint(k->n, k->off, k->size);
	struct entry *e = find(r->owner, name);
	if (!e->owner) {
		*e = (struct entry){ r->owner, name, fp, k->n };
		used++;
	} else if (e->n != k->n || e->fp != fp) {
		e->n = AMBIGUOUS;
	}
}

int cg_image_record(uintptr_t owner, const void *image, size_t limit, cg_image_sm_fn want_sm)
{
	if (!owner)
		return -1;
	pthread_mutex_lock(&table_lock);
	forget_locked(owner);
	struct record r = { owner, false };
	int n = cg_image_scan(image, limit, want_sm, record_one, &r);
	if (n < 0 || r.failed) {
		forget_locked(owner); /* half a module could hide that a name is ambiguous */
		n = -1;
	}
	pthread_mutex_unlock(&table_lock);
	return n;
}

void cg_image_forget(uintptr_t owner)
{
	pthread_mutex_lock(&table_lock);
	forget_locked(owner);
	pthread_mutex_unlock(&table_lock);
}

int cg_image_params(uintptr_t owner, const char *name, uint64_t *fingerprint)
{
	if (!owner || !name)
		return -1;
	size_t len = strnlen(name, 1 << 16);
	pthread_mutex_lock(&table_lock);
	const struct entry *e = find(owner, name_hash(name, len));
	int n = e && e->owner && e->n != AMBIGUOUS ? (int)e->n : -1;
	if (n >= 0 && fingerprint)
		*fingerprint = e->fp;
	pthread_mutex_unlock(&table_lock);
	return n;
}
