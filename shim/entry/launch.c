/* The graphable entry points: kernel launches, async memsets, async device copies. Each packs
 * the call into an op (sig.h), asks the engine, and forwards the original call itself when the
 * engine says PASS — so learning costs one lookup and a copy, and nothing is re-encoded. */
#define _GNU_SOURCE
#include <string.h>

#include "shim/loader/counts.h"
#include "shim/loader/driver.h"
#include "shim/backend/events.h"
#include "shim/observers/floor.h"
#include "shim/observers/hooktime.h"
#include "shim/backend/layout.h"
#include "shim/base/log.h"
#include "shim/backend/nvtx.h"
#include "shim/base/options.h"
#include "shim/backend/ptds.h"
#include "shim/base/shim.h"
#include "shim/base/sig.h"
#include "shim/streams/registry.h"


#define ARGS_INLINE 4096 /* larger parameter blocks (rare) are not graphed */

/* Where the call goes when nothing may touch it (disabled, inside the shim or NCCL, or a
 * stream the program is capturing itself). h as the driver resolves it: 0 in a _ptsz entry
 * point is the per-thread stream. Exit work in progress is no reason (only its end is): another
 * thread may still launch while exit() submits the work deferred on its stream, and must not
 * overtake it. */
static bool hands_off(CUstream h)
{
	if (cg_shim_passthrough())
		return true;
	if (!cg_driver_ready() || atomic_load_explicit(&cg_shim.driver_gone, memory_order_relaxed))
		return true;
	if (atomic_load_explicit(&cg_shim.captures, memory_order_acquire) > 0) {
		CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
		if (CG_REAL(cuStreamIsCapturing)(h, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE) {
			cg_events_bypass(CG_R_CAPTURE);
			return true;
		}
	}
	return false;
}

/* The engine's verdict on an op; with CUGRAFT_NVTX on, the ops run eagerly that it counted
 * meanwhile are marked (nvtx.h). */
static enum cg_verdict submit_marked(struct cg_sstate *s, const struct cg_op *op)
{
	if (!cg_nvtx_on())
		return cg_submit(s->eng, op);
	cg_nvtx_submit_begin();
	enum cg_verdict v = cg_submit(s->eng, op);
	cg_nvtx_submit_end(v == CG_PASS);
	return v;
}

/* Gives the op to the engine. true: the engine took it (deferred or launched in a graph).
 * false: it passed it, and the stream lock stays held (hence the name) while the caller forwards
 * the original call, so that the forward stays in order with anything the flusher does; release
 * unlocks. */
static bool take_or_lock(struct cg_sstate *s, const struct cg_op *op)
{
	cg_stream_order(s);
	pthread_mutex_lock(&s->lock);
	if (s->per_thread)
		cg_ptds_catch_up(s);
	/* One writer (the lock holder): a plain increment, no locked instruction. */
	atomic_store_explicit(&s->ops, atomic_load_explicit(&s->ops, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
	if (!s->eng) {
		if (s->why_eager == CG_R_PER_THREAD)
			cg_ptds_note_eager();
		cg_events_bypass(s->why_eager);
		return false;
	}
	if (submit_marked(s, op) == CG_PASS)
		return false;
	cg_stream_sync_pending(s);
	pthread_mutex_unlock(&s->lock);
	return true;
}

/* After the forward of an op take_or_lock passed. */
static void release(struct cg_sstate *s)
{
	cg_stream_sync_pending(s);
	pthread_mutex_unlock(&s->lock);
}

/* A launch the shim forwarded itself after a boundary (its shape not yet accepted by the
 * driver): the engine counts it among the stream's ops and, where the driver ran it (`ran`),
 * starts its learning chunk with it, so that the first iteration of a loop, where such launches
 * come, has the ops and chunks of the next ones (the stream is then no longer settled). */
static void passed(struct cg_sstate *s, const struct cg_op *op, bool ran)
{
	pthread_mutex_lock(&s->lock);
	if (s->eng) {
		cg_passed(s->eng, op, ran);
		cg_stream_sync_pending(s);
	}
	pthread_mutex_unlock(&s->lock);
}

/* Copies launch attributes so that equal settings give equal bytes: only the bytes the
 * attribute defines are kept. Attributes carrying events, or unknown ones, make it ungraphable. */
static bool pack_attrs(struct cg_sig *sig, const CUlaunchAttribute *a, unsigned n)
{
	if (n > CG_MAX_ATTRS)
		return false;
	sig->nattrs = n;
	for (unsigned i = 0; i < n; i++) {
		CUlaunchAttribute *d = &sig->attrs[i];
		memset(d, 0, sizeof(*d));
		d->id = a[i].id;
		size_t len;
		switch (a[i].id) {
		case CU_LAUNCH_ATTRIBUTE_IGNORE: len = 0; break;
		case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW: len = sizeof(CUaccessPolicyWindow); break;
		case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
		case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
		case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
		case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
		case CU_LAUNCH_ATTRIBUTE_PRIORITY:
		case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
		case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
			len = sizeof(int); break;
		case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
		case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
			len = 3 * sizeof(unsigned); break;
		case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP: len = sizeof(CUlaunchMemSyncDomainMap); break;
		default: return false; /* events, device-updatable nodes, attributes newer than us */
		}
		memcpy(&d->value, &a[i].value, len);
	}
	return true;
}

/* Zeroes the padding between parameters: whatever the stack (or the program's buffer) held
 * there must not reach the comparison of arguments. */
static void clear_gaps(const struct cg_layout *l, unsigned char *buf)
{
	for (uint32_t i = 0; i < l->ngaps; i++)
		memset(buf + l->gaps[i].off, 0, l->gaps[i].size);
}

/* Most parameters are pointers and scalars: copied inline, not by a call to memcpy. */
static inline void copy_param(unsigned char *to, const void *from, uint32_t size)
{
	switch (size) {
	case 8: memcpy(to, from, 8); break;
	case 4: memcpy(to, from, 4); break;
	case 2: memcpy(to, from, 2); break;
	case 1: memcpy(to, from, 1); break;
	default: memcpy(to, from, size); break;
	}
}

/* Packs the parameters (either form) into `buf`; returns the byte count or -1. */
static int pack_args(const struct cg_layout *l, void **params, void **extra, unsigned char *buf)
{
	if (l->size > ARGS_INLINE)
		return -1;
	if (params) {
		for (uint32_t i = 0; i < l->n; i++)
			copy_param(buf + l->p[i].off, params[i], l->p[i].size);
		clear_gaps(l, buf);
		return (int)l->size;
	}
	if (!extra)
		return l->n == 0 ? 0 : -1;
	void *ptr = NULL;
	size_t size = 0;
	for (void **e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
		if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER)
			ptr = e[1];
		else if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE)
			size = *(size_t *)e[1];
		else
			return -1;
	}
	if (!ptr || size < l->size)
		return -1;
	memcpy(buf, ptr, l->size);
	clear_gaps(l, buf);
	return (int)l->size;
}

/* A shape every device refuses (a zero or too large dimension, a grid that is no multiple of
 * the launch's cluster or preferred cluster dimension): the launch goes to the driver as the
 * program made it, so that the program gets the error. Deferred, it would only fail in a graph
 * patch or capture, where the failure reaches nobody. Limits of the function or the device (its
 * threads per block, shared memory beyond its attribute, cluster dimensions compiled into it)
 * are met by proof: only a shape the driver accepted before in the same context is deferred
 * (cg_launch_proven). */
static bool shape_valid(const unsigned grid[3], const unsigned block[3], const struct cg_sig *sig)
{
	/* d - 1 >= max: d is 0 or above max (unsigned), one compare per dimension */
	if ((grid[0] - 1u >= 0x7fffffffu) | (grid[1] - 1u >= 65535u) | (grid[2] - 1u >= 65535u) |
	    (block[0] - 1u >= 1024u) | (block[1] - 1u >= 1024u) | (block[2] - 1u >= 64u) ||
	    (uint64_t)block[0] * block[1] * block[2] > 1024)
		return false;
	unsigned c[3] = { 1, 1, 1 }; /* the regular cluster */
	const CUlaunchAttribute *pref = NULL;
	for (uint32_t i = 0; i < sig->nattrs; i++) {
		if (sig->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION)
			pref = &sig->attrs[i];
		if (sig->attrs[i].id != CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
			continue;
		c[0] = sig->attrs[i].value.clusterDim.x;
		c[1] = sig->attrs[i].value.clusterDim.y;
		c[2] = sig->attrs[i].value.clusterDim.z;
		for (int d = 0; d < 3; d++)
			if (!c[d] || grid[d] % c[d])
				return false;
	}
	/* A preferred substitute cluster (cuda.h, preferredClusterDim): x and y divide the grid and
	 * are multiples of the regular cluster's, z equals the regular cluster's. */
	if (pref) {
		const unsigned p[3] = { pref->value.preferredClusterDim.x, pref->value.preferredClusterDim.y,
		                        pref->value.preferredClusterDim.z };
		for (int d = 0; d < 2; d++)
			if (!p[d] || grid[d] % p[d] || p[d] % c[d])
				return false;
		if (p[2] != c[2])
			return false;
	}
	return true;
}

/* The shape a clustered or cooperative launch needs resident at once (sig.h), else 0. */
static uint64_t bound_of(const struct cg_sig *sig, const unsigned grid[3], uint64_t threads, unsigned shmem)
{
	uint64_t cluster = 1;
	bool coop = false;
	for (uint32_t i = 0; i < sig->nattrs; i++) {
		const CUlaunchAttribute *a = &sig->attrs[i];
		uint64_t c = 1;
		if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
			c = (uint64_t)a->value.clusterDim.x * a->value.clusterDim.y * a->value.clusterDim.z;
		else if (a->id == CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION)
			c = (uint64_t)a->value.preferredClusterDim.x * a->value.preferredClusterDim.y *
			    a->value.preferredClusterDim.z;
		else if (a->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && a->value.cooperative)
			coop = true;
		cluster = c > cluster ? c : cluster;
	}
	if (cluster == 1 && !coop)
		return 0;
	uint64_t blocks = coop ? (uint64_t)grid[0] * grid[1] * grid[2] : 0;
	if (cluster > 0x1f || shmem > 0x1fffff || blocks > 0x7ffffff)
		return CG_BOUND_NEVER;
	return CG_BOUND_THREADS(threads) | CG_BOUND_SHMEM(shmem) | CG_BOUND_CLUSTER(cluster) |
	       CG_BOUND_GRID(blocks);
}

/* Builds the op of a kernel launch; else why it cannot be graphed (then it is a boundary:
 * it must run after the pending work of its stream). buf: CG_ARGS_PARAMS + ARGS_INLINE bytes.
 * `need`: what the launch asks of its function (sig.h), to be proven before the op is given to
 * the engine; its layout stays NULL where the shape is not checked. */
static enum cg_reason kernel_op(struct cg_op *op, struct cg_sig *sig, unsigned char *buf,
                      struct cg_launch_need *need, CUfunction f, const unsigned grid[3],
                      const unsigned block[3], unsigned shmem, const CUlaunchAttribute *attrs,
                      unsigned nattrs, void **params, void **extra)
{
	const struct cg_layout *l = cg_layout_of(f);
	if (!l)
		return CG_R_UNGRAPHABLE;
	if (l == &cg_layout_no_memory)
		return CG_R_NO_MEMORY;
	cg_layout_count(l);
	if (!l->in_scope)
		return CG_R_SCOPE;
	sig->kind = CG_K_KERNEL;
	sig->fn = (uint64_t)(uintptr_t)f;
	sig->layout = l;
	if (!pack_attrs(sig, attrs, nattrs) || !shape_valid(grid, block, sig))
		return CG_R_UNGRAPHABLE;
	uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
	need->layout = l;
	need->limits = atomic_load_explicit(&cg_layout_limits, memory_order_acquire);
	need->open = threads << 32 | shmem;
	memcpy(need->grid, grid, sizeof(need->grid));
	need->bound = bound_of(sig, grid, threads, shmem);
	/* the shape, written in place (struct cg_launch_shape) */
	memcpy(buf + offsetof(struct cg_launch_shape, grid), grid, 3 * sizeof(unsigned));
	memcpy(buf + offsetof(struct cg_launch_shape, block), block, 3 * sizeof(unsigned));
	_Static_assert(offsetof(struct cg_launch_shape, zero) ==
	               offsetof(struct cg_launch_shape, shmem) + sizeof(uint32_t) &&
	               sizeof(struct cg_launch_shape) == offsetof(struct cg_launch_shape, zero) +
	               sizeof(uint32_t), "shmem, then zero, end the shape");
	const uint32_t tail[2] = { shmem, 0 };
	memcpy(buf + offsetof(struct cg_launch_shape, shmem), tail, sizeof(tail));
	int n = pack_args(l, params, extra, buf + CG_ARGS_PARAMS);
	if (n < 0)
		return CG_R_UNGRAPHABLE;
	op->sig = sig;
	op->sig_len = cg_sig_len(sig);
	op->args = buf;
	op->args_len = CG_ARGS_PARAMS + (uint32_t)n;
	op->hash = sig->nattrs ? cg_sig_stable_hash(sig) : l->op_hash;
	op->name = l->name;
	return CG_R_NONE;
}

/* --- the wrappers: each packs its op, then forwards the call or not by the route it takes --- */

/* Where a launch goes (launch_route_or_lock). */
enum launch_route {
	LAUNCH_HANDS_OFF, /* forwarded as made, nothing counted (hands_off) */
	LAUNCH_BOUNDARY,  /* not for the engine (`why`): a boundary on its stream, then forwarded */
	LAUNCH_UNPROVEN,  /* a boundary, then forwarded, then counted by the engine (passed): a
	                     kernel whose shape the driver has not accepted yet in this context */
	LAUNCH_TAKEN,     /* the engine took it (deferred, or launched in a graph): success */
	LAUNCH_IN_ORDER,  /* the engine passed it: forwarded under the stream lock (take_or_lock) */
};

/* One program launch on its way through its wrapper. */
struct launch {
	enum cg_entry entry;
	bool ptsz;                   /* a _ptsz entry point: stream 0 is the per-thread stream */
	CUstream h;                  /* the stream as the program passed it */
	enum cg_reason why;          /* CG_R_NONE: the op may be given to the engine */
	struct cg_launch_need *need; /* a kernel's shape, proven before the engine sees the op
	                                (sig.h); NULL for a memop */
	struct cg_sstate *s;         /* its stream's record once looked up; NULL: none */
	uint64_t key;                /* what profile mode names the launch by (floor.h) */
	struct cg_op op;
};

/* A kernel launch, and the bytes its op points to. */
struct kernel_launch {
	struct launch l;
	struct cg_launch_need need;
	struct cg_sig sig;
	unsigned char buf[CG_ARGS_PARAMS + ARGS_INLINE];
};

static void launch_init(struct launch *l, enum cg_entry entry, bool ptsz, CUstream h)
{
	l->entry = entry;
	l->ptsz = ptsz;
	l->h = h;
	l->why = CG_R_UNGRAPHABLE;
	l->need = NULL;
	l->s = NULL;
}

/* Either form of kernel launch (c: as cuLaunchKernelEx takes it; NULL is the driver's to
 * refuse): its op, where the shim may touch the launch at all. */
static void kernel_launch(struct kernel_launch *k, enum cg_entry entry, bool ptsz,
                          const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
	launch_init(&k->l, entry, ptsz, c ? c->hStream : NULL);
	k->l.key = (uintptr_t)f;
	k->need = (struct cg_launch_need){ .layout = NULL };
	k->l.need = &k->need;
	cg_driver_init(); /* also when disabled: it finds the real entry point */
	if (!c || cg_shim_passthrough() || !cg_driver_ready())
		return;
	const unsigned g[3] = { c->gridDimX, c->gridDimY, c->gridDimZ };
	const unsigned b[3] = { c->blockDimX, c->blockDimY, c->blockDimZ };
	k->l.why = kernel_op(&k->l.op, &k->sig, k->buf, &k->need, f, g, b, c->sharedMemBytes,
	                     c->attrs, c->numAttrs, params, extra);
}

/* The launch's route. On LAUNCH_IN_ORDER it returns with the stream lock held (take_or_lock;
 * launch_forwarded releases it). */
static enum launch_route launch_route_or_lock(struct launch *l)
{
	if (hands_off(l->ptsz && !l->h ? CU_STREAM_PER_THREAD : l->h))
		return LAUNCH_HANDS_OFF;
	cg_count(CG_COUNT_ENTRY + l->entry);
	cg_tls.api = cg_entry_name[l->entry];
	/* exit work started: nothing more is deferred; the stream's deferred work goes first */
	if (l->why == CG_R_NONE && atomic_load_explicit(&cg_shim.exiting, memory_order_relaxed))
		l->why = CG_R_EXIT;
	l->s = cg_stream_get(l->h, l->ptsz);
	if (l->s && l->why == CG_R_NONE && l->need && !cg_launch_deferrable(l->need, l->s->ctx))
		l->why = CG_R_UNPROVEN_SHAPE;
	if (l->s && l->why == CG_R_NONE)
		return take_or_lock(l->s, &l->op) ? LAUNCH_TAKEN : LAUNCH_IN_ORDER;
	if (l->why == CG_R_NONE)
		l->why = CG_R_UNGRAPHABLE;
	cg_events_bypass(l->why);
	cg_boundary_stream(l->h, l->ptsz, l->why);
	return l->why == CG_R_UNPROVEN_SHAPE ? LAUNCH_UNPROVEN : LAUNCH_BOUNDARY;
}

/* After the forward on `route`, which the driver answered with r: an unproven launch is counted
 * by the engine, a kernel's shape the driver accepted remembered, the stream lock released
 * where the route held it. Returns r. */
static CUresult launch_forwarded(struct launch *l, enum launch_route route, CUresult r)
{
	if (route == LAUNCH_HANDS_OFF || route == LAUNCH_TAKEN)
		return r;
	if (route == LAUNCH_UNPROVEN)
		passed(l->s, &l->op, r == CUDA_SUCCESS);
	if (r == CUDA_SUCCESS && l->s && l->need)
		cg_launch_accepted(l->need, l->s->ctx);
	if (route == LAUNCH_IN_ORDER)
		release(l->s);
	return r;
}

/* The end of every launch wrapper: the program's call as made (`call`) on the route its launch
 * takes; timed in profile mode, unless hands off. `t0`: the wrapper's start where its time is
 * sampled (hooktime.h; a call cugraft keeps its hands off is not), and then its forward too. */
#define LAUNCH_FORWARD(l, call, t0)                                                             \
	enum launch_route route_ = launch_route_or_lock(l);                                     \
	CUresult r_ = route_ == LAUNCH_TAKEN ? CUDA_SUCCESS                                     \
	            : launch_forwarded(l, route_, CG_FORWARDED(route_ == LAUNCH_HANDS_OFF ? (call) : \
	                  CG_HOOKTIME_FORWARD(t0, CG_FLOOR_TIMED(call, (l)->key))));              \
	if (route_ != LAUNCH_HANDS_OFF)                                                         \
		cg_hooktime_end(t0);                                                            \
	return r_;

#define KERNEL_HOOK(entry, ptsz)                                                                \
	CG_EXPORT CUresult entry(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, \
	                         unsigned by, unsigned bz, unsigned shmem, CUstream h,           \
	                         void **params, void **extra)                                    \
	{                                                                                       \
		uint64_t t0 = cg_hooktime_begin();                                              \
		const CUlaunchConfig c = { gx, gy, gz, bx, by, bz, shmem, h, NULL, 0 };         \
		struct kernel_launch k;                                                         \
		kernel_launch(&k, CG_E_##entry, ptsz, &c, f, params, extra);                    \
		LAUNCH_FORWARD(&k.l, CG_REAL(entry)(f, gx, gy, gz, bx, by, bz, shmem, h, params, extra), t0) \
	}

#define KERNEL_EX_HOOK(entry, ptsz)                                                             \
	CG_EXPORT CUresult entry(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) \
	{                                                                                       \
		uint64_t t0 = cg_hooktime_begin();                                              \
		struct kernel_launch k;                                                         \
		kernel_launch(&k, CG_E_##entry, ptsz, c, f, params, extra);                     \
		LAUNCH_FORWARD(&k.l, CG_REAL(entry)(c, f, params, extra), t0)                   \
	}

KERNEL_HOOK(cuLaunchKernel, false)
KERNEL_HOOK(cuLaunchKernel_ptsz, true)
KERNEL_EX_HOOK(cuLaunchKernelEx, false)
KERNEL_EX_HOOK(cuLaunchKernelEx_ptsz, true)

/* Memory ops: the kind is the signature; destination, value or source and size are arguments,
 * so a moving or growing buffer is patched into the graph's memset/copy node like a kernel
 * argument. */
static void mem_op(struct cg_op *op, struct cg_sig *sig, uint64_t args[CG_MEMOP_ARGS],
                   enum cg_kind kind, CUdeviceptr dst, uint64_t v, size_t n)
{
	memset(sig, 0, offsetof(struct cg_sig, attrs));
	sig->kind = kind;
	args[0] = dst;
	args[1] = v;
	args[2] = n;  /* an argument, not the signature (sig.h) */
	op->sig = sig;
	op->sig_len = cg_sig_len(sig);
	op->args = args;
	op->args_len = CG_MEMOP_ARGS * sizeof(uint64_t);
	op->hash = cg_sig_stable_hash(sig);
	op->name = kind == CG_K_COPY ? "memcpyDtoD" : "memset";
}

/* [p, p + bytes) inside one live allocation, as the driver knows it now. */
static bool in_allocation(CUdeviceptr p, size_t bytes)
{
	CUdeviceptr base = 0;
	size_t size = 0;
	if (!CG_REAL(cuMemGetAddressRange_v2))
		return false;
	cg_tls.internal++;
	CUresult r = CG_REAL(cuMemGetAddressRange_v2)(&base, &size, p);
	cg_tls.internal--;
	return r == CUDA_SUCCESS && p >= base && bytes <= size - (p - base);
}

/* A deferred memop returns success, so only one the driver could not refuse is deferred: a
 * destination (and a copy's source) inside one live allocation, a 32-bit memset's destination
 * 4-byte aligned, and something to do. Any other goes to the driver as the program made it and
 * gets the driver's own answer. (A graph node update is no proof: it may take what the direct
 * call refuses.) */
static enum cg_reason memop_checked(enum cg_kind kind, CUdeviceptr dst, uint64_t v, size_t n)
{
	if (!cg_opt_scope()->memops)
		return CG_R_SCOPE;
	if (cg_shim_passthrough() || !cg_driver_ready())
		return CG_R_NONE; /* forwarded untouched (hands_off) */
	size_t elem = kind == CG_K_MEMSET32 ? 4 : 1;
	if (n == 0 || n > SIZE_MAX / elem || dst % elem || !in_allocation(dst, n * elem) ||
	    (kind == CG_K_COPY && !in_allocation((CUdeviceptr)v, n)))
		return CG_R_MEMOP_RANGE;
	return CG_R_NONE;
}

/* A memset or device copy, and the bytes its op points to. */
struct mem_launch {
	struct launch l;
	struct cg_sig sig;
	uint64_t args[CG_MEMOP_ARGS];
};

static void mem_launch(struct mem_launch *m, enum cg_entry entry, bool ptsz, CUstream h,
                       enum cg_kind kind, CUdeviceptr dst, uint64_t v, size_t n)
{
	launch_init(&m->l, entry, ptsz, h);
	cg_driver_init(); /* also when disabled: it finds the real entry point */
	m->l.why = memop_checked(kind, dst, v, n);
	mem_op(&m->l.op, &m->sig, m->args, kind, dst, v, n);
	m->l.key = m->l.op.hash;
}

#define MEM_HOOK(entry, ptsz, kind, T2)                                                         \
	CG_EXPORT CUresult entry(CUdeviceptr dst, T2 v, size_t n, CUstream h)                   \
	{                                                                                       \
		uint64_t t0 = cg_hooktime_begin();                                              \
		struct mem_launch m;                                                            \
		mem_launch(&m, CG_E_##entry, ptsz, h, kind, dst, (uint64_t)v, n);               \
		LAUNCH_FORWARD(&m.l, CG_REAL(entry)(dst, v, n, h), t0)                          \
	}

MEM_HOOK(cuMemsetD8Async, false, CG_K_MEMSET8, unsigned char)
MEM_HOOK(cuMemsetD8Async_ptsz, true, CG_K_MEMSET8, unsigned char)
MEM_HOOK(cuMemsetD32Async, false, CG_K_MEMSET32, unsigned int)
MEM_HOOK(cuMemsetD32Async_ptsz, true, CG_K_MEMSET32, unsigned int)
MEM_HOOK(cuMemcpyDtoDAsync_v2, false, CG_K_COPY, CUdeviceptr)
MEM_HOOK(cuMemcpyDtoDAsync_v2_ptsz, true, CG_K_COPY, CUdeviceptr)
