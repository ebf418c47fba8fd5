/* How the shim packs an op for the policy engine (policy/op.h): the signature bytes (what a
 * graph node must share to be reused) and the argument bytes (what is patched per launch; for a
 * kernel its launch shape, then its parameters). */
#ifndef CG_SHIM_SIG_H
#define CG_SHIM_SIG_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "policy/op.h"

enum cg_kind { CG_K_KERNEL = 1, CG_K_MEMSET8, CG_K_MEMSET32, CG_K_COPY };

/* Launch shapes the driver accepted eagerly for one function in one context (cg_launch_need).
 * A function's limits are its device's (a CUkernel can be launched in the contexts of several
 * devices), so they are kept per context, claimed in order: a NULL ctx ends the list. */
#define CG_LAYOUT_CTXS 8
struct cg_layout_seen {
	_Atomic(CUcontext) ctx;
	_Atomic uint64_t open;  /* block threads << 32 | dynamic shared memory: the largest of each */
	_Atomic uint64_t grid;  /* per dimension, the greatest common divisor of the grids: x << 32 |
	                           y << 16 | z (cluster dimensions compiled into a function divide
	                           every grid it accepts); 0: none yet */
	_Atomic uint64_t bound; /* one accepted clustered or cooperative shape (CG_BOUND_*), or 0 */
};

/* A kernel's parameter layout (cuFuncGetParamInfo / cuKernelGetParamInfo), interned per
 * function handle, so that equal pointers mean equal layouts. */
struct cg_layout {
	uint32_t n;         /* parameters */
	uint32_t size;      /* packed bytes: end of the last parameter */
	const char *name;   /* kernel name (our copy: the driver's dies with its module) or NULL */
	uint64_t hash;      /* cg_layout_hash: the same kernel hashes the same in every process */
	uint64_t op_hash;   /* cg_layout_op_hash: the op hash of its launches without attributes */
	_Atomic uint64_t launches; /* for the report's kernel list */
	bool in_scope;      /* CUGRAFT_SCOPE lets this kernel be graphed (decided once) */
	const struct cg_layout *next_all; /* every layout ever made, also those of unloaded modules */
	/* Bytes below `size` that no parameter covers (alignment padding): zeroed in every packed
	 * copy, so that stale bytes there never look like a changed argument. */
	uint32_t ngaps;
	const struct cg_layout_gap { uint32_t off, size; } *gaps; /* in the same allocation */
	struct cg_layout_seen seen[CG_LAYOUT_CTXS];
	struct { uint32_t off, size; } p[];
};

#define CG_MAX_ATTRS 8

/* No padding anywhere: signatures are compared and hashed as bytes. */
struct cg_sig {
	uint32_t kind;
	uint32_t nattrs;
	uint64_t fn;                    /* CUfunction / CUkernel */
	const struct cg_layout *layout; /* kernels */
	uint64_t a, b;                  /* memset: -, count; copy: -, bytes (the rest is in args:
	                                   {destination, value} / {destination, source}) */
	CUlaunchAttribute attrs[CG_MAX_ATTRS]; /* normalised: unused bytes zero. Cluster dimensions
	                                          among them: a node keeps its attributes when it is
	                                          updated, so they must match */
};

/* A kernel op's argument bytes start with its launch shape; its parameters follow at
 * CG_ARGS_PARAMS. cuGraphExecKernelNodeSetParams sets grid, block and dynamic shared memory of
 * an instantiated node like its parameters, so a shape that changes between iterations (a
 * growing concatenation in a decoding loop, a sequence length) is patched into the graph, not a
 * divergence that drops the chunk. */
struct cg_launch_shape {
	uint32_t grid[3], block[3], shmem;
	uint32_t zero; /* always 0: pads the shape to whole 8-byte words */
};
/* The policy tracks changed arguments per 8-byte word: the parameters keep their word
 * boundaries behind the shape, so a moving pointer still changes one word. */
#define CG_ARGS_PARAMS ((uint32_t)sizeof(struct cg_launch_shape))
_Static_assert(sizeof(struct cg_launch_shape) % 8 == 0, "the shape must be whole 8-byte words");

/* Kernel ops only. Argument bytes come back from the policy at any alignment: memcpy. */
static inline struct cg_launch_shape cg_op_shape(const void *args)
{
	struct cg_launch_shape sh;
	memcpy(&sh, args, sizeof(sh));
	return sh;
}
static inline const char *cg_op_params(const void *args)
{
	return (const char *)args + CG_ARGS_PARAMS;
}

static inline uint32_t cg_sig_len(const struct cg_sig *s)
{
	return (uint32_t)(offsetof(struct cg_sig, attrs) + s->nattrs * sizeof(CUlaunchAttribute));
}

/* What identifies a kernel across processes: its name and parameter layout (a handle's value
 * is per process). */
static inline uint64_t cg_layout_hash(const struct cg_layout *l)
{
	uint64_t h = cg_sig_hash(l->p, l->n * sizeof(l->p[0])) ^ l->size;
	if (l->name)
		h ^= cg_sig_hash(l->name, strlen(l->name)) * 0x9e3779b97f4a7c15ull;
	return h;
}

/* The op's hash (policy/op.h): the signature's bytes with the function handle and the layout
 * pointer replaced by the layout's hash. Where chunks are cut, and so which chunks exist, must
 * not depend on where the driver put a kernel: the same program must cut the same way in every
 * run. Equal signatures still hash equally (the layout is interned per handle), and matching
 * compares the full signature, so a kernel of the same name and layout from another module is
 * told apart there. */
static inline uint64_t cg_sig_stable_hash(struct cg_sig *s)
{
	uint64_t fn = s->fn;
	const struct cg_layout *l = s->layout;
	s->fn = l ? l->hash : 0;
	s->layout = NULL;
	uint64_t h = cg_sig_hash(s, cg_sig_len(s));
	s->fn = fn;
	s->layout = l;
	return h;
}

/* The op hash (cg_sig_stable_hash) of a launch of `l` with no launch attributes: its signature
 * is the layout's and nothing else, so it is computed once, with the layout (after l->hash). */
static inline uint64_t cg_layout_op_hash(const struct cg_layout *l)
{
	struct cg_sig s;
	memset(&s, 0, offsetof(struct cg_sig, attrs));
	s.kind = CG_K_KERNEL;
	s.layout = l;
	return cg_sig_stable_hash(&s);
}

/* The policy hands signatures back (op->sig) packed among other bytes, at any alignment: they
 * are read through memcpy into aligned storage, never through a cast pointer. */
static inline struct cg_sig *cg_sig_read(struct cg_sig *s, const void *sig, uint32_t len)
{
	memcpy(s, sig, len < sizeof(*s) ? len : sizeof(*s));
	return s;
}
static inline uint32_t cg_sig_kind(const void *sig)
{
	uint32_t k;
	memcpy(&k, (const char *)sig + offsetof(struct cg_sig, kind), sizeof(k));
	return k;
}
static inline const struct cg_layout *cg_sig_layout(const void *sig)
{
	const struct cg_layout *l;
	memcpy(&l, (const char *)sig + offsetof(struct cg_sig, layout), sizeof(l));
	return l;
}

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
};
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
static inline bool cg_launch_deferrable(const struct cg_launch_need *n, CUcontext ctx)
{
	if (!cg_layout_seen_in(n->layout, ctx))
		return cg_layout_first(n->layout, ctx);
	return cg_launch_proven(n, ctx);
}

void cg_layout_accept(const struct cg_launch_need *n, CUcontext ctx);
/* The driver accepted the launch eagerly (forwarded, CUDA_SUCCESS): remembered when larger than
 * what was (rarely; otherwise a load and a compare). */
static inline void cg_launch_accepted(const struct cg_launch_need *n, CUcontext ctx)
{
	if (n->layout && ctx && !cg_launch_proven(n, ctx))
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
/* Module or library unloaded: handles may be reused, forget every layout. */
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
