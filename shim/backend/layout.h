/* Kernel parameter layouts (layout.c): one per function or kernel handle, asked of the driver
 * or read from the module image, interned; and the launch shapes each function was accepted
 * with, per context, which prove a launch before it may be deferred. */
#ifndef CG_SHIM_LAYOUT_H
#define CG_SHIM_LAYOUT_H

#include "shim/base/sig.h"

/* What a kernel launch asks of its function beyond the limits of every device (launch.c): a
 * block's threads (the function's registers may allow fewer than 1024) and dynamic shared memory
 * (its attribute may allow less than the device), cluster dimensions compiled into it (its grid),
 * and for a clustered or cooperative launch the whole shape, whose blocks must be resident
 * together. Only what the driver accepted eagerly in this context proves a launch: a larger one
 * goes to the driver as made, so that a refusal reaches the program (deferred into a graph, the
 * patch or graph launch would fail where nobody sees it). Asking the driver for the limits
 * instead would add failing queries (a CUkernel taken for a CUfunction) that a debugger lists as
 * the program's errors. */
struct cg_launch_need {
	const struct cg_layout *layout; /* NULL: nothing to prove or record */
	uint64_t open;                  /* as cg_layout_seen.open */
	uint32_t grid[3];
	uint64_t bound;                 /* 0: neither clustered nor cooperative */
	uint64_t limits;                /* cg_layout_limits before the launch reached the driver */
	bool proven;                    /* cg_launch_deferrable found the shape proven */
};
/* Bumped by every attribute set that may lower a limit (cg_layout_limit_set): a launch accepted
 * under the old limit, recorded after the new one was set, would prove shapes it no longer
 * allows, so a launch records its shape only if no such set came between its start and its
 * record. */
extern _Atomic uint64_t cg_layout_limits;
/* A bound shape packed so that one shape covers another when each field is at least as large
 * (fewer threads, less shared memory, a smaller cluster or grid is resident wherever the larger
 * one was): threads, shared memory, cluster blocks, cooperative grid blocks (0 if not). */
#define CG_BOUND_THREADS(v) ((uint64_t)(v) << 53) /* 11 bits */
#define CG_BOUND_SHMEM(v) ((uint64_t)(v) << 32)   /* 21 bits */
#define CG_BOUND_CLUSTER(v) ((uint64_t)(v) << 27) /* 5 bits */
#define CG_BOUND_GRID(v) ((uint64_t)(v))          /* 27 bits */
#define CG_BOUND_NEVER UINT64_MAX                 /* fields too large to pack: never proven */
#define CG_GRID_ONE ((1ull << 32) | (1ull << 16) | 1)

static inline bool cg_bound_covers(uint64_t have, uint64_t want)
{
	static const uint64_t fields[4] = { CG_BOUND_THREADS(0x7ff), CG_BOUND_SHMEM(0x1fffff),
	                                    CG_BOUND_CLUSTER(0x1f), CG_BOUND_GRID(0x7ffffff) };
	for (int i = 0; i < 4; i++)
		if ((want & fields[i]) > (have & fields[i]))
			return false;
	return true;
}

static inline bool cg_grid_divides(uint64_t have, const uint32_t g[3])
{
	if (have == CG_GRID_ONE) /* the usual case: grids of every size were accepted */
		return true;
	uint32_t x = (uint32_t)(have >> 32), y = (uint32_t)(have >> 16) & 0xffff, z = (uint32_t)have & 0xffff;
	return x && y && z && g[0] % x == 0 && g[1] % y == 0 && g[2] % z == 0;
}

static inline const struct cg_layout_seen *cg_layout_seen_in(const struct cg_layout *l, CUcontext ctx)
{
	for (int i = 0; i < CG_LAYOUT_CTXS; i++) {
		CUcontext c = atomic_load_explicit(&l->seen[i].ctx, memory_order_acquire);
		if (!c)
			return NULL;
		if (c == ctx)
			return &l->seen[i];
	}
	return NULL;
}

/* The driver accepted a launch at least this large of this function in this context. */
static inline bool cg_launch_proven(const struct cg_launch_need *n, CUcontext ctx)
{
	const struct cg_layout_seen *e = cg_layout_seen_in(n->layout, ctx);
	if (!e)
		return false;
	if (n->bound && !cg_bound_covers(atomic_load_explicit(&e->bound, memory_order_relaxed), n->bound))
		return false;
	uint64_t o = atomic_load_explicit(&e->open, memory_order_relaxed);
	return (n->open >> 32) <= (o >> 32) && (uint32_t)n->open <= (uint32_t)o &&
	       cg_grid_divides(atomic_load_explicit(&e->grid, memory_order_relaxed), n->grid);
}

bool cg_layout_first(const struct cg_layout *l, CUcontext ctx);
/* The launch may be given to the engine: its shape is proven, or it is the function's first
 * launch in this context (this call claims the context's record). The engine has then never
 * seen its signature on a stream of this context, and it defers only an op that matches a learned
 * one, signature bytes and all: it passes it, to run eagerly and prove its shape, without the
 * boundary an unproven shape makes. */
static inline bool cg_launch_deferrable(struct cg_launch_need *n, CUcontext ctx)
{
	if (!cg_layout_seen_in(n->layout, ctx))
		return cg_layout_first(n->layout, ctx);
	return n->proven = cg_launch_proven(n, ctx);
}

void cg_layout_accept(const struct cg_launch_need *n, CUcontext ctx);
/* The driver accepted the launch eagerly (forwarded, CUDA_SUCCESS): remembered when larger than
 * what was (rarely; otherwise a load and a compare, none where cg_launch_deferrable proved it). */
static inline void cg_launch_accepted(const struct cg_launch_need *n, CUcontext ctx)
{
	if (n->layout && ctx && !n->proven && !cg_launch_proven(n, ctx))
		cg_layout_accept(n, ctx);
}
/* cuFuncSetAttribute / cuKernelSetAttribute of `attr` to `value` on handle h, about to reach the
 * driver: a limit it may lower (dynamic shared memory, cluster sizes) forgets the shapes accepted
 * above it, so that they are proven again. h's own layout always; every layout when the value
 * changed (`changed`: a CUkernel and the CUfunctions of its contexts share limits). */
void cg_layout_limit_set(const void *h, int attr, int value, bool changed);
/* ctx is destroyed (its handle may come back for another device): forget what it accepted. */
void cg_layout_forget_ctx(CUcontext ctx);

/* Parameter layout of a function or kernel handle; NULL when the driver cannot say;
 * &cg_layout_no_memory when it could not be stored (asked again at the next launch). */
const struct cg_layout *cg_layout_of(CUfunction f);
extern const struct cg_layout cg_layout_no_memory;
/* Module or library unloaded, or a context destroyed (its modules with it): handles may be
 * reused, forget every layout. */
void cg_layout_reset(void);
/* `k` is a CUkernel (the driver handed it out as one): its layout is asked with the CUkernel
 * queries, so that no query fails on the wrong kind of handle. */
void cg_layout_note_kernel(CUkernel k);
/* Counts a launch of the kernel (report). */
static inline void cg_layout_count(const struct cg_layout *l)
{
	atomic_fetch_add_explicit(&((struct cg_layout *)l)->launches, 1, memory_order_relaxed);
}
struct cg_json;
/* "key":[{name, launches}...] for the `top` most launched kernels. */
void cg_layout_json_top(struct cg_json *j, const char *key, int top);

#endif
