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
/* A memop's arguments: destination, then source (a copy) or value (a memset), then its size:
 * a copy's bytes, a memset's elements. The size travels with the arguments, since a graph's
 * 1-D copy and memset nodes take a new one (cuGraphExecMemcpyNodeSetParams,
 * cuGraphExecMemsetNodeSetParams): a tensor copied or zeroed whole as it grows is one op that is
 * patched, not a new op every step. (Where a driver refused a new width, the patch fails and
 * the chunk backs off: its ops run as the program submitted them.) */
#define CG_MEMOP_ARGS 3
static inline uint64_t cg_memop_arg(const void *args, int i)
{
	uint64_t v;
	memcpy(&v, (const char *)args + i * sizeof(v), sizeof(v));
	return v;
}

/* Bytes of a copy, elements of a memset. */
static inline uint64_t cg_memop_count(const void *args)
{
	return cg_memop_arg(args, 2);
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

#endif
