/* Parameter layouts per function handle (layout.h): asked of the driver once per kernel, then
 * found by a lock-free lookup on every launch; and the launch shapes each function was accepted
 * with, per context, which prove a launch before it is deferred. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "shim/loader/driver.h"
#include "shim/base/image.h"
#include "layout.h"
#include "shim/base/shim.h"
#include "shim/base/json.h"
#include "shim/base/log.h"
#include "shim/base/options.h"
#include "shim/base/sig.h"

#define SLOTS 65536 /* PyTorch jobs load a few thousand kernels */
#define MAX_PARAMS 1024

struct table {
	struct { _Atomic(CUfunction) key; const struct cg_layout *val; } slot[SLOTS];
};
static _Atomic(struct table *) current;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const struct cg_layout *all_layouts; /* guarded by lock */
/* Marks "asked, the driver could not say", so that we ask once. */
static const struct cg_layout unknown_layout;
const struct cg_layout cg_layout_no_memory;

static size_t slot_of(CUfunction f)
{
	uint64_t x = (uint64_t)(uintptr_t)f * 0x9e3779b97f4a7c15ULL;
	return (size_t)(x >> 48) & (SLOTS - 1);
}

static const struct cg_layout *lookup(struct table *t, CUfunction f)
{
	for (size_t i = slot_of(f), n = 0; n < SLOTS; i = (i + 1) & (SLOTS - 1), n++) {
		CUfunction k = atomic_load_explicit(&t->slot[i].key, memory_order_acquire);
		if (k == f)
			return t->slot[i].val;
		if (!k)
			return NULL;
	}
	return NULL;
}

/* CUkernel handles the program was handed (cuLibraryGetKernel, cuLibraryEnumerateKernels). Kept
 * across unloads: a stale entry only makes the first query of a reused handle the wrong kind,
 * which the other kind's query then answers. Full: later kernels are guessed as CUfunctions. */
#define KERNEL_SLOTS 16384
static CUkernel kernels[KERNEL_SLOTS]; /* guarded by lock; static: no allocation to fail */

static size_t kernel_slot(const void *k)
{
	return (size_t)(((uint64_t)(uintptr_t)k * 0x9e3779b97f4a7c15ULL) >> 50) & (KERNEL_SLOTS - 1);
}

void cg_layout_note_kernel(CUkernel k)
{
	if (!k)
		return;
	pthread_mutex_lock(&lock);
	for (size_t i = kernel_slot(k), n = 0; n < KERNEL_SLOTS / 2; i = (i + 1) & (KERNEL_SLOTS - 1), n++) {
		if (kernels[i] == k)
			break;
		if (!kernels[i]) {
			kernels[i] = k;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

static bool is_kernel_locked(const void *f)
{
	for (size_t i = kernel_slot(f), n = 0; n < KERNEL_SLOTS / 2; i = (i + 1) & (KERNEL_SLOTS - 1), n++) {
		if (kernels[i] == (CUkernel)f)
			return true;
		if (!kernels[i])
			return false;
	}
	return false;
}

/* The parameter count entry points (cuFuncGetParamCount, cuKernelGetParamCount) are newer than
 * the cuda.h we build with: found by name, NULL in older drivers. */
typedef CUresult (*param_count_fn)(void *handle, size_t *count);
static param_count_fn func_count, kernel_count; /* guarded by lock */
static bool counts_resolved;

/* Offsets and sizes of f's parameters as the kind of handle `as_kernel` says; the count, or -1
 * when the driver refuses. cuFuncGetParamInfo answers CUfunctions, cuKernelGetParamInfo
 * CUkernels; a launch may pass either. With a count entry point every query is in range, so no
 * call fails (a debugger or compute-sanitizer lists every failing driver call as the program's
 * error). Older drivers are probed up to the first CUDA_ERROR_INVALID_VALUE, "no such
 * parameter", a failing call: only where the loaded image did not state the count (from_image). */
static int query(CUfunction f, bool as_kernel, uint32_t *off, uint32_t *size, int max)
{
	param_count_fn count = as_kernel ? kernel_count : func_count;
	size_t have = 0;
	if (count) {
		if (count((void *)f, &have) != CUDA_SUCCESS || have > (size_t)max)
			return -1;
		max = (int)have;
	}
	int n = 0;
	for (; n < max; n++) {
		size_t o = 0, s = 0;
		CUresult r = as_kernel ? CG_REAL(cuKernelGetParamInfo)((CUkernel)f, (size_t)n, &o, &s)
		                       : CG_REAL(cuFuncGetParamInfo)(f, (size_t)n, &o, &s);
		if (r == CUDA_ERROR_INVALID_VALUE && !count)
			return n;
		if (r != CUDA_SUCCESS)
			return -1;
		off[n] = (uint32_t)o;
		size[n] = (uint32_t)s;
	}
	return count ? n : -1;
}

/* Exactly parameters 0..n-1 of f: n, or -1 when the driver refuses one. */
static int query_known(CUfunction f, bool as_kernel, uint32_t *off, uint32_t *size, int n)
{
	for (int i = 0; i < n; i++) {
		size_t o = 0, s = 0;
		CUresult r = as_kernel ? CG_REAL(cuKernelGetParamInfo)((CUkernel)f, (size_t)i, &o, &s)
		                       : CG_REAL(cuFuncGetParamInfo)(f, (size_t)i, &o, &s);
		if (r != CUDA_SUCCESS)
			return -1;
		off[i] = (uint32_t)o;
		size[i] = (uint32_t)s;
	}
	return n;
}

/* The layout of f as the image it was loaded from states it (image.c), confirmed by the driver
 * parameter by parameter; -1 when the image did not say, or said otherwise than the driver (then
 * the probe decides). Its name and module (library) are asked first: calls that fail only on a
 * handle of the other kind, which then decides `*as_kernel`. */
static int from_image(CUfunction f, bool *as_kernel, uint32_t *off, uint32_t *size)
{
	const char *name = NULL;
	void *owner = NULL;
	bool k = *as_kernel;
	if (!cg_real[CG_E_cuFuncGetName] || !cg_real[CG_E_cuKernelGetName] ||
	    !cg_real[CG_E_cuFuncGetModule] || !cg_real[CG_E_cuKernelGetLibrary])
		return -1;
	CUresult r = k ? CG_REAL(cuKernelGetName)(&name, (CUkernel)f) : CG_REAL(cuFuncGetName)(&name, f);
	if (r != CUDA_SUCCESS) {
		k = !k;
		r = k ? CG_REAL(cuKernelGetName)(&name, (CUkernel)f) : CG_REAL(cuFuncGetName)(&name, f);
		if (r != CUDA_SUCCESS)
			return -1;
		*as_kernel = k;
	}
	r = k ? CG_REAL(cuKernelGetLibrary)((CUlibrary *)&owner, (CUkernel)f)
	      : CG_REAL(cuFuncGetModule)((CUmodule *)&owner, f);
	uint64_t fp = 0;
	int n = r == CUDA_SUCCESS ? cg_image_params((uintptr_t)owner, name, &fp) : -1;
	if (n < 0 || n > MAX_PARAMS)
		return -1;
	if (query_known(f, k, off, size, n) != n || cg_image_fingerprint((uint32_t)n, off, size) != fp) {
		cg_log(CG_LOG_DEBUG, "%.200s: the driver's parameters are not the %d its image states: probed",
		       name ? name : "?", n);
		return -1;
	}
	return n;
}

static int by_offset(const void *a, const void *b)
{
	uint32_t x = ((const struct cg_layout_gap *)a)->off, y = ((const struct cg_layout_gap *)b)->off;
	return (x > y) - (x < y);
}

/* The gaps between parameters, into `gaps` (room for l->n). Parameters are usually in offset
 * order already; sorting a copy keeps this right when they are not. */
static void find_gaps(struct cg_layout *l, struct cg_layout_gap *gaps)
{
	static struct cg_layout_gap sorted[MAX_PARAMS]; /* guarded by lock, as below */
	for (uint32_t i = 0; i < l->n; i++)
		sorted[i] = (struct cg_layout_gap){ l->p[i].off, l->p[i].size };
	qsort(sorted, l->n, sizeof(sorted[0]), by_offset);
	uint32_t end = 0, k = 0;
	for (uint32_t i = 0; i < l->n; i++) {
		if (sorted[i].off > end)
			gaps[k++] = (struct cg_layout_gap){ end, sorted[i].off - end };
		if (sorted[i].off + sorted[i].size > end)
			end = sorted[i].off + sorted[i].size;
	}
	l->ngaps = k;
	l->gaps = gaps;
}

/* The parameters of f (off, size): their count, or -1 when the driver cannot say; and whether
 * f is a CUkernel. Preferred: the driver's count; then the count the loaded image states; then
 * the probe. Lock held. */
static int params_of(CUfunction f, bool *as_kernel, uint32_t *off, uint32_t *size)
{
	if (!counts_resolved) {
		func_count = (param_count_fn)cg_driver_sym("cuFuncGetParamCount");
		kernel_count = (param_count_fn)cg_driver_sym("cuKernelGetParamCount");
		counts_resolved = cg_driver_ready();
	}
	*as_kernel = is_kernel_locked(f);
	bool known = false; /* n came from the image, confirmed */
	int n = -1;
	if (!func_count || !kernel_count)
		n = from_image(f, as_kernel, off, size);
	if (n < 0)
		n = query(f, *as_kernel, off, size, MAX_PARAMS);
	else
		known = true;
	if (!known && (n < 0 || (n == 0 && !(*as_kernel ? kernel_count : func_count)))) {
		/* A handle of the other kind (one we did not see handed out), or, probed, perhaps
		 * really no parameters: the other kind's query decides. */
		int k = query(f, !*as_kernel, off, size, MAX_PARAMS);
		if (k > 0 || (k == 0 && n < 0)) {
			n = k;
			*as_kernel = !*as_kernel;
		}
	}
	return n;
}

/* The layout of f's n parameters, named, hashed and put on the list of every layout; or
 * &cg_layout_no_memory. Lock held. */
static const struct cg_layout *layout_new(CUfunction f, bool as_kernel, const uint32_t *off,
                                          const uint32_t *size, int n)
{
	/* At most one gap before each parameter (in offset order). */
	struct cg_layout *l = malloc(sizeof(*l) + (size_t)n * (sizeof(l->p[0]) + sizeof(l->gaps[0])));
	if (!l)
		return &cg_layout_no_memory;
	l->n = (uint32_t)n;
	l->size = 0;
	for (int i = 0; i < n; i++) {
		l->p[i].off = off[i];
		l->p[i].size = size[i];
		if (off[i] + size[i] > l->size)
			l->size = off[i] + size[i];
	}
	find_gaps(l, (struct cg_layout_gap *)&l->p[n]);
	for (int i = 0; i < CG_LAYOUT_CTXS; i++) {
		atomic_init(&l->seen[i].ctx, NULL);
		atomic_init(&l->seen[i].open, 0);
		atomic_init(&l->seen[i].grid, 0);
		atomic_init(&l->seen[i].bound, 0);
	}
	const char *name = NULL;
	atomic_init(&l->launches, 0);
	if (as_kernel && cg_real[CG_E_cuKernelGetName])
		CG_REAL(cuKernelGetName)(&name, (CUkernel)f);
	else if (cg_real[CG_E_cuFuncGetName])
		CG_REAL(cuFuncGetName)(&name, f);
	l->name = name ? strndup(name, 512) : NULL;
	l->hash = cg_layout_hash(l);
	l->op_hash = cg_layout_op_hash(l);
	l->in_scope = cg_scope_kernel(l->name);
	l->next_all = all_layouts;
	all_layouts = l;
	return l;
}

/* Called with the lock held: its 8 KiB of scratch are shared, not per thread. */
static const struct cg_layout *ask_driver(CUfunction f)
{
	static uint32_t off[MAX_PARAMS], size[MAX_PARAMS];
	if (!cg_real[CG_E_cuFuncGetParamInfo] || !cg_real[CG_E_cuKernelGetParamInfo])
		return &unknown_layout;
	bool as_kernel;
	int n = params_of(f, &as_kernel, off, size);
	if (n < 0)
		return &unknown_layout;
	return layout_new(f, as_kernel, off, size, n);
}

/* This thread's latest answer (cg_tls.layout): loops launch the same kernel again and again.
 * Keyed by the table too (a table is never freed, so a new one never has an old one's address):
 * a reset forgets it. */
static __attribute__((noinline)) const struct cg_layout *layout_find(struct table *t, CUfunction f);

const struct cg_layout *cg_layout_of(CUfunction f)
{
	struct table *t = atomic_load_explicit(&current, memory_order_acquire);
	if (t && t == cg_tls.layout.table && f == cg_tls.layout.f)
		return cg_tls.layout.layout;
	return layout_find(t, f);
}

static const struct cg_layout *layout_find(struct table *t, CUfunction f)
{
	const struct cg_layout *l = t ? lookup(t, f) : NULL;
	if (l) {
		l = l == &unknown_layout ? NULL : l;
		cg_tls.layout.table = t;
		cg_tls.layout.f = f;
		cg_tls.layout.layout = l;
		return l;
	}

	pthread_mutex_lock(&lock);
	t = atomic_load_explicit(&current, memory_order_relaxed);
	if (!t) {
		t = calloc(1, sizeof(*t));
		atomic_store_explicit(&current, t, memory_order_release);
	}
	l = t ? lookup(t, f) : &cg_layout_no_memory;
	if (!l) {
		cg_tls.internal++;
		l = ask_driver(f);
		cg_tls.internal--;
		for (size_t i = slot_of(f), n = 0; l != &cg_layout_no_memory && n < SLOTS / 2;
		     i = (i + 1) & (SLOTS - 1), n++) {
			if (!atomic_load_explicit(&t->slot[i].key, memory_order_relaxed)) {
				t->slot[i].val = l;
				atomic_store_explicit(&t->slot[i].key, f, memory_order_release);
				break;
			}
		}
	}
	pthread_mutex_unlock(&lock);
	return l == &unknown_layout ? NULL : l;
}

/* --- launch shapes the driver accepted (sig.h, cg_launch_need) --------------------------- */

static uint32_t gcd(uint32_t a, uint32_t b)
{
	while (b) {
		uint32_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* Raises a record to cover `want` with `merge`; records only grow here (cg_layout_limit_set
 * lowers them). */
static void grow(_Atomic uint64_t *rec, uint64_t want, uint64_t (*merge)(uint64_t have, uint64_t want))
{
	uint64_t have = atomic_load_explicit(rec, memory_order_relaxed), next;
	do {
		next = merge(have, want);
		if (next == have)
			return;
	} while (!atomic_compare_exchange_weak_explicit(rec, &have, next, memory_order_relaxed,
	                                                memory_order_relaxed));
}

static uint64_t merge_open(uint64_t have, uint64_t want)
{
	uint64_t t = (want >> 32) > (have >> 32) ? want >> 32 : have >> 32;
	uint32_t m = (uint32_t)want > (uint32_t)have ? (uint32_t)want : (uint32_t)have;
	return t << 32 | m;
}

static uint64_t merge_grid(uint64_t have, uint64_t want)
{
	return (uint64_t)gcd((uint32_t)(have >> 32), (uint32_t)(want >> 32)) << 32 |
	       (uint64_t)gcd((uint32_t)(have >> 16) & 0xffff, (uint32_t)(want >> 16) & 0xffff) << 16 |
	       gcd((uint32_t)have & 0xffff, (uint32_t)want & 0xffff);
}

/* Fields do not combine for a bound shape (its threads and shared memory limit together how many
 * blocks are resident): the last accepted shape that the record did not cover replaces it. */
static uint64_t merge_bound(uint64_t have, uint64_t want)
{
	return cg_bound_covers(have, want) ? have : want;
}

/* ctx's record in l, claimed if it has none; NULL when all are taken by other contexts (their
 * launches then stay eager). `*claimed`: this call made it. */
static struct cg_layout_seen *seen_claim(const struct cg_layout *l, CUcontext ctx, bool *claimed)
{
	struct cg_layout_seen *seen = ((struct cg_layout *)l)->seen;
	for (int i = 0; i < CG_LAYOUT_CTXS; i++) {
		CUcontext c = NULL;
		*claimed = atomic_compare_exchange_strong_explicit(&seen[i].ctx, &c, ctx, memory_order_acq_rel,
		                                                   memory_order_acquire);
		if (*claimed || c == ctx)
			return &seen[i];
	}
	*claimed = false;
	return NULL;
}

bool cg_layout_first(const struct cg_layout *l, CUcontext ctx)
{
	bool claimed;
	return ctx && seen_claim(l, ctx, &claimed) && claimed;
}

_Atomic uint64_t cg_layout_limits;
/* Orders records (cg_layout_accept, rare: only shapes not yet proven) against the lowering of
 * limits (cg_layout_limit_set): a record is made whole before or after a lowering, never across. */
static pthread_mutex_t limits_lock = PTHREAD_MUTEX_INITIALIZER;

void cg_layout_accept(const struct cg_launch_need *n, CUcontext ctx)
{
	if (n->bound == CG_BOUND_NEVER)
		return;
	bool claimed;
	struct cg_layout_seen *e = seen_claim(n->layout, ctx, &claimed);
	if (!e)
		return;
	pthread_mutex_lock(&limits_lock);
	if (atomic_load_explicit(&cg_layout_limits, memory_order_relaxed) == n->limits) {
		grow(&e->open, n->open, merge_open);
		grow(&e->grid, (uint64_t)n->grid[0] << 32 | (uint64_t)n->grid[1] << 16 | n->grid[2],
		     merge_grid);
		if (n->bound)
			grow(&e->bound, n->bound, merge_bound);
	}
	pthread_mutex_unlock(&limits_lock);
}

/* Lowers what `e` remembers to what a limit of `attr` at `value` still allows. */
static void clamp(struct cg_layout_seen *e, int attr, int value)
{
	if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
		/* Cluster sizes: clustered shapes are proven again; a required cluster dimension must
		 * also divide every grid. */
		atomic_store_explicit(&e->bound, 0, memory_order_relaxed);
		if (attr == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH ||
		    attr == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT ||
		    attr == CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH)
			atomic_store_explicit(&e->grid, 0, memory_order_relaxed);
		return;
	}
	uint32_t v = value < 0 ? 0 : (uint32_t)value;
	uint64_t o = atomic_load_explicit(&e->open, memory_order_relaxed);
	while ((uint32_t)o > v && !atomic_compare_exchange_weak_explicit(&e->open, &o, (o >> 32) << 32 | v,
	                                                                 memory_order_relaxed, memory_order_relaxed))
		;
	/* A bound shape with less shared memory is covered by the one accepted. */
	uint64_t b = atomic_load_explicit(&e->bound, memory_order_relaxed);
	const uint64_t shmem = CG_BOUND_SHMEM(0x1fffff);
	while ((b & shmem) > CG_BOUND_SHMEM(v) &&
	       !atomic_compare_exchange_weak_explicit(&e->bound, &b, (b & ~shmem) | CG_BOUND_SHMEM(v),
	                                              memory_order_relaxed, memory_order_relaxed))
		;
}

static void clamp_layout(const struct cg_layout *l, int attr, int value)
{
	for (int i = 0; i < CG_LAYOUT_CTXS; i++)
		clamp(&((struct cg_layout *)l)->seen[i], attr, value);
}

void cg_layout_limit_set(const void *h, int attr, int value, bool changed)
{
	/* The attributes cuda.h lets a program set that could make a shape refused: the others
	 * (threads per block among them) cannot be set, and the carveout is a preference. */
	switch (attr) {
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
	case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
	case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
	case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
		break;
	default:
		return;
	}
	/* Allowing non-portable cluster sizes lowers nothing (cluster launchers such as CUTLASS's
	 * set it before every clustered launch: forgetting their shapes would keep them eager). */
	if (attr == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED && value == 1)
		return;
	/* A repeat (cuBLASLt sets an attribute before most launches) costs a lock-free lookup and
	 * an uncontended lock. */
	struct table *t = atomic_load_explicit(&current, memory_order_acquire);
	const struct cg_layout *own = t ? lookup(t, (CUfunction)h) : NULL;
	pthread_mutex_lock(&limits_lock);
	atomic_fetch_add_explicit(&cg_layout_limits, 1, memory_order_release);
	if (own && own != &unknown_layout && own != &cg_layout_no_memory)
		clamp_layout(own, attr, value);
	if (changed) {
		pthread_mutex_lock(&lock);
		for (const struct cg_layout *l = all_layouts; l; l = l->next_all)
			clamp_layout(l, attr, value);
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_unlock(&limits_lock);
}

void cg_layout_forget_ctx(CUcontext ctx)
{
	pthread_mutex_lock(&lock);
	for (const struct cg_layout *l = all_layouts; l; l = l->next_all) {
		struct cg_layout_seen *seen = ((struct cg_layout *)l)->seen;
		for (int i = 0; i < CG_LAYOUT_CTXS; i++) {
			if (atomic_load_explicit(&seen[i].ctx, memory_order_relaxed) != ctx)
				continue;
			atomic_store_explicit(&seen[i].open, 0, memory_order_relaxed);
			atomic_store_explicit(&seen[i].grid, 0, memory_order_relaxed);
			atomic_store_explicit(&seen[i].bound, 0, memory_order_relaxed);
		}
	}
	pthread_mutex_unlock(&lock);
}

void cg_layout_reset(void)
{
	/* Readers may still walk the old table: it is left allocated (unloads are rare). */
	pthread_mutex_lock(&lock);
	atomic_store_explicit(&current, NULL, memory_order_release);
	pthread_mutex_unlock(&lock);
}

void cg_layout_json_top(struct cg_json *j, const char *key, int top)
{
	enum { MAX_TOP = 32 };
	const struct cg_layout *best[MAX_TOP];
	int n = 0;
	top = top < MAX_TOP ? top : MAX_TOP;
	pthread_mutex_lock(&lock);
	for (const struct cg_layout *l = all_layouts; l; l = l->next_all) {
		if (!atomic_load(&l->launches))
			continue;
		/* Insertion into a small array sorted by launches, keeping the `top` largest. */
		uint64_t launches = atomic_load(&l->launches);
		if (n == top && atomic_load(&best[top - 1]->launches) >= launches)
			continue;
		int k = n < top ? n++ : top - 1;
		while (k > 0 && atomic_load(&best[k - 1]->launches) < launches) {
			best[k] = best[k - 1];
			k--;
		}
		best[k] = l;
	}
	pthread_mutex_unlock(&lock);
	cg_json_arr(j, key);
	for (int i = 0; i < n; i++) {
		cg_json_obj(j, NULL);
		cg_json_str(j, "name", best[i]->name);
		cg_json_uint(j, "launches", atomic_load(&best[i]->launches));
		cg_json_obj_end(j);
	}
	cg_json_arr_end(j);
}
