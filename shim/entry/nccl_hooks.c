/* NCCL in the default scope: the wrappers generated from nccl.def submit the pending work a
 * collective or communicator call could observe, then run NCCL with cg_tls.internal raised so that
 * the kernels and driver calls NCCL makes inside pass through untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

/* nccl.h declares ncclGroupStart() and ncclGroupEnd() without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop
#ifndef NCCL_REVOKE_DEFAULT
/* nccl.h before 2.28.9 (e.g. 2.28.3 in /usr/include on the H200 machine) lacks it; a newer
 * libnccl at run time has it, and it must still be wrapped. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
#endif

#include "collgraph.h"
#include "shim/loader/driver.h"
#include "shim/base/json.h"
#include "shim/base/log.h"
#include "nccl_hooks.h"
#include "shim/base/options.h"
#include "shim/loader/real_dlsym.h"
#include "shim/base/shim.h"
#include "shim/streams/registry.h"

enum cg_nccl_entry {
#define CG_NCCL(n, ...) CG_N_##n,
#define CG_NCCL_PURE(n) CG_N_##n,
#include "nccl.def"
#undef CG_NCCL
#undef CG_NCCL_PURE
	CG_N_COUNT
};

static const char *const entry_name[CG_N_COUNT] = {
#define CG_NCCL(n, ...) [CG_N_##n] = #n,
#define CG_NCCL_PURE(n) [CG_N_##n] = #n,
#include "nccl.def"
#undef CG_NCCL
#undef CG_NCCL_PURE
};

enum kind { K_COLLECTIVE, K_GROUP, K_COMM };

/* The libnccl definitions, found on first use; calls of each wrapped entry (for the report). */
static _Atomic(void *) real_fn[CG_N_COUNT];
static _Atomic uint64_t calls[CG_N_COUNT];

/* The definition the program would have called without us: the next one after ours (a linked or
 * RTLD_GLOBAL libnccl), else the one in a libnccl.so.2 already loaded RTLD_LOCAL. We never load
 * libnccl ourselves: NULL when the process has none. */
static void *find_real(enum cg_nccl_entry e)
{
	void *p = atomic_load_explicit(&real_fn[e], memory_order_acquire);
	if (p)
		return p;
	p = cg_real_dlsym(RTLD_NEXT, entry_name[e]);
	if (!p) {
		void *h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			p = cg_real_dlsym(h, entry_name[e]);
			dlclose(h);
		}
	}
	if (p)
		atomic_store_explicit(&real_fn[e], p, memory_order_release);
	return p;
}

static ncclResult_t missing(enum cg_nccl_entry e)
{
	cg_log(CG_LOG_WARN, "%s called but no libnccl in the process defines it", entry_name[e]);
	return ncclSystemError;
}

/* A group's collectives are launched by its outermost ncclGroupEnd, so that is where their
 * streams' pending work must be submitted: work the program submits between a collective and
 * the group's end runs before NCCL's kernels. Groups are per thread in NCCL too. */
#define GROUP_STREAMS CG_TLS_GROUP_STREAMS /* this thread's group: cg_tls.nccl_group (shim.h) */

static void group_add(CUstream h)
{
	__typeof__(cg_tls.nccl_group) *g = &cg_tls.nccl_group;
	for (int i = 0; i < g->n && i < GROUP_STREAMS; i++)
		if (g->s[i] == h)
			return;
	if (g->n < GROUP_STREAMS)
		g->s[g->n++] = h;
	else
		g->n = GROUP_STREAMS + 1;
}

static void group_submit(void)
{
	__typeof__(cg_tls.nccl_group) *g = &cg_tls.nccl_group;
	if (g->n > GROUP_STREAMS)
		cg_boundary_all(CG_R_COLLECTIVE);
	else
		for (int i = 0; i < g->n; i++)
			cg_boundary_stream(g->s[i], false, CG_R_COLLECTIVE);
	g->n = 0;
}

/* Where an NCCL call goes (nccl_route). */
enum nccl_route {
	NCCL_MISSING,  /* no libnccl in the process defines it */
	NCCL_FORWARD,  /* forwarded as made: disabled, nested in NCCL or the shim, no driver */
	NCCL_INTERNAL, /* counted, and the pending work it may observe submitted: NCCL runs with
	                  cg_tls.internal raised, so that what it launches inside passes through */
};

/* Before the real call: the pending work the call may observe is submitted, as its kind says. */
static void submit_before(enum cg_nccl_entry e, enum kind k, CUstream stream)
{
	switch (k) {
	case K_COLLECTIVE:
		/* Always at the call: NCCL enqueues a one-rank collective right here, even inside a
		 * group (ncclLaunchOneRank); the group end submits what was launched after it. */
		cg_boundary_stream(stream, false, CG_R_COLLECTIVE);
		if (cg_tls.nccl_group.depth > 0)
			group_add(stream);
		break;
	case K_GROUP:
		if (e == CG_N_ncclGroupStart)
			cg_tls.nccl_group.depth++;
		else if (cg_tls.nccl_group.depth > 0 && --cg_tls.nccl_group.depth == 0)
			group_submit();
		break;
	case K_COMM:
		cg_boundary_all(CG_R_COLLECTIVE);
		break;
	}
}

/* Calls that end a communicator: its graphs and vote communicator go first. */
static bool comm_ends(enum cg_nccl_entry e)
{
	return e == CG_N_ncclCommFinalize || e == CG_N_ncclCommDestroy || e == CG_N_ncclCommAbort ||
	       e == CG_N_ncclCommRevoke;
}

/* The call's route, with all that comes before the real call done. `found`: libnccl defines
 * it; `comm` matters to calls that end a communicator only. */
static enum nccl_route nccl_route(enum cg_nccl_entry e, enum kind k, bool found, CUstream stream,
                                  ncclComm_t comm)
{
	if (!found)
		return NCCL_MISSING;
	cg_driver_init();
	if (cg_shim_passthrough() || !cg_driver_ready())
		return NCCL_FORWARD;
	atomic_fetch_add_explicit(&calls[e], 1, memory_order_relaxed);
	submit_before(e, k, stream);
	if (comm_ends(e)) { /* its graphs and vote communicator go first (NCCL calls: internal) */
		cg_tls.internal++;
		cg_coll_comm_gone(comm);
		cg_tls.internal--;
	}
	return NCCL_INTERNAL;
}

/* --- the collectives scope (collgraph.h): what the vote needs from libnccl ------------------ */
static struct cg_vote_nccl vote_fns;
static pthread_once_t vote_fns_once = PTHREAD_ONCE_INIT;

static void vote_fns_find(void)
{
	vote_fns.split = (__typeof__(vote_fns.split))find_real(CG_N_ncclCommSplit);
	vote_fns.all_reduce = (__typeof__(vote_fns.all_reduce))find_real(CG_N_ncclAllReduce);
	vote_fns.abort = (__typeof__(vote_fns.abort))find_real(CG_N_ncclCommAbort);
	vote_fns.destroy = (__typeof__(vote_fns.destroy))find_real(CG_N_ncclCommDestroy);
	vote_fns.user_rank = (__typeof__(vote_fns.user_rank))find_real(CG_N_ncclCommUserRank);
	vote_fns.count = (__typeof__(vote_fns.count))find_real(CG_N_ncclCommCount);
	if (!vote_fns.abort || !vote_fns.destroy || !vote_fns.user_rank || !vote_fns.count)
		vote_fns.split = NULL; /* no vote without them */
}

static const struct cg_vote_nccl *vote_nccl(void)
{
	pthread_once(&vote_fns_once, vote_fns_find);
	return &vote_fns;
}

/* Graph this collective? Only in the scope, and outside groups: a group's collectives are
 * launched together at its end and are the same on every rank by NCCL's rules. */
static bool coll_scoped(void)
{
	return cg_tls.nccl_group.depth == 0 && cg_opt_scope()->collectives;
}

/* NCCL's real call `call` with cg_tls.internal raised: what it launches inside passes through. */
#define CG_INTERNAL(call)                                                                       \
	({ cg_tls.internal++; ncclResult_t in_r_ = (call); cg_tls.internal--; in_r_; })

/* The key words of a collective: every argument but the last (its stream), as integers; and
 * its arguments with another stream in the last place. */
#define CG_W(x) (uint64_t)(uintptr_t)(x)
#define CG_NARGS(...) CG_NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define CG_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, n, ...) n
#define CG_CAT(a, b) CG_CAT_(a, b)
#define CG_CAT_(a, b) a##b
#define CG_WORDS(...) CG_CAT(CG_WORDS_, CG_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define CG_WORDS_6(a, b, c, d, e, s) CG_W(a), CG_W(b), CG_W(c), CG_W(d), CG_W(e)
#define CG_WORDS_7(a, b, c, d, e, f, s) CG_W(a), CG_W(b), CG_W(c), CG_W(d), CG_W(e), CG_W(f)
#define CG_WORDS_8(a, b, c, d, e, f, g, s) \
	CG_W(a), CG_W(b), CG_W(c), CG_W(d), CG_W(e), CG_W(f), CG_W(g)
#define CG_ON(on, ...) CG_CAT(CG_ON_, CG_NARGS(__VA_ARGS__))(on, __VA_ARGS__)
#define CG_ON_6(on, a, b, c, d, e, s) (a, b, c, d, e, on)
#define CG_ON_7(on, a, b, c, d, e, f, s) (a, b, c, d, e, f, on)
#define CG_ON_8(on, a, b, c, d, e, f, g, s) (a, b, c, d, e, f, g, on)
#define CG_ARGS(...) __VA_ARGS__
#define CG_FIRST(a, ...) a

/* In the collectives scope, outside a group: c, filled from the call, and its vote (collgraph.h;
 * CG_COLL_CAPTURE returns with its communicator's record locked until cg_coll_captured). */
static enum cg_coll_act coll_begin_or_lock(struct cg_coll_call *c, enum cg_nccl_entry e,
                                           ncclComm_t comm, CUstream stream, const uint64_t *w,
                                           size_t nw)
{
	if (!coll_scoped())
		return CG_COLL_EAGER;
	*c = (struct cg_coll_call){ .entry = e, .api = entry_name[e], .comm = comm, .stream = stream,
	                            .nw = (int)nw };
	memcpy(c->w, w, nw * sizeof(*w));
	return cg_coll_begin_or_lock(c, vote_nccl());
}

/* Each wrapper's prototype checked against nccl.h, and declared (nccl.h leaves ncclGroupStart
 * and ncclGroupEnd unprototyped); a collective's words fit the key. */
#define CG_NCCL_PURE(n) _Static_assert(sizeof(&n) != 0, #n " is not declared in nccl.h");
#define CG_NCCL(n, kind, params, args, stream)                                                  \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&n), ncclResult_t(*) params),   \
	               #n " does not match its nccl.h prototype");                              \
	_Static_assert(K_##kind != K_COLLECTIVE || CG_NARGS args - 1 <= CG_COLL_WORDS,         \
	               #n ": too many words");                                                  \
	ncclResult_t n params;
#include "nccl.def"
#undef CG_NCCL
#undef CG_NCCL_PURE

/* What NCCL runs, cg_tls.internal raised around it (the wrapper's last step). Group and
 * communicator calls: the call as made. A collective in the scope votes (coll_begin_or_lock):
 * on agreement it is replayed from its graph (DONE: NCCL is not called), or captured first on
 * a private stream with the same arguments; otherwise it runs as made. */
#define CG_RUN_GROUP(n, real_, args, stream) real_ args
#define CG_RUN_COMM(n, real_, args, stream) real_ args
#define CG_RUN_COLLECTIVE(n, real_, args, stream)                                               \
	({                                                                                      \
		const uint64_t w_[] = { CG_WORDS args };                                        \
		struct cg_coll_call c_;                                                         \
		enum cg_coll_act a_ = coll_begin_or_lock(&c_, CG_N_##n, comm, stream, w_,       \
		                                         sizeof(w_) / sizeof(w_[0]));           \
		if (a_ == CG_COLL_CAPTURE) /* NCCL runs on the capture stream */                \
			a_ = cg_coll_captured(&c_, real_ CG_ON(c_.capture, CG_ARGS args));       \
		a_ == CG_COLL_DONE ? ncclSuccess : real_ args;                                  \
	})
/* The communicator a call may end (comm_ends), else NULL. */
#define CG_COMM_GROUP(...) NULL
#define CG_COMM_COMM(...) ((ncclComm_t)(CG_FIRST(__VA_ARGS__)))
#define CG_COMM_COLLECTIVE(...) NULL

#define CG_NCCL_PURE(n)
#define CG_NCCL(n, kind, params, args, stream)                                                  \
	CG_EXPORT ncclResult_t n params                                                         \
	{                                                                                       \
		ncclResult_t(*real_) params = (ncclResult_t(*) params)find_real(CG_N_##n);      \
		switch (nccl_route(CG_N_##n, K_##kind, real_ != NULL, stream, CG_COMM_##kind args)) { \
		case NCCL_MISSING: return missing(CG_N_##n);                                    \
		case NCCL_FORWARD: return real_ args;                                           \
		default: return CG_INTERNAL(CG_RUN_##kind(n, real_, args, stream)); /* INTERNAL */ \
		}                                                                               \
	}
#include "nccl.def"
#undef CG_NCCL
#undef CG_NCCL_PURE

static void *const wrapper[CG_N_COUNT] = {
#define CG_NCCL(n, ...) [CG_N_##n] = (void *)n,
#define CG_NCCL_PURE(n)
#include "nccl.def"
#undef CG_NCCL
#undef CG_NCCL_PURE
};

void *cg_nccl_handout(void *real, const char *name)
{
	if (!real || !name || cg_shim_disabled())
		return real;
	for (int e = 0; e < CG_N_COUNT; e++) {
		if (!wrapper[e] || strcmp(name, entry_name[e]) != 0)
			continue;
		/* Only a lookup that lands in libnccl (a plugin's or our own symbol is left alone). */
		Dl_info info;
		if (!dladdr(real, &info) || !info.dli_fname)
			return real;
		const char *base = strrchr(info.dli_fname, '/');
		base = base ? base + 1 : info.dli_fname;
		if (strncmp(base, "libnccl", 7) != 0 || !strstr(base, ".so"))
			return real;
		/* A libnccl opened RTLD_LOCAL is invisible to find_real: remember this one. */
		void *none = NULL;
		atomic_compare_exchange_strong(&real_fn[e], &none, real);
		return wrapper[e];
	}
	return real;
}

void cg_nccl_json(struct cg_json *j)
{
	cg_json_obj(j, "collectives");
	for (int e = 0; e < CG_N_COUNT; e++) {
		uint64_t n = atomic_load_explicit(&calls[e], memory_order_relaxed);
		if (n)
			cg_json_uint(j, entry_name[e], n);
	}
	cg_json_obj_end(j);
	cg_coll_json(j);
}

int cg_nccl_version(void)
{
	ncclResult_t (*get)(int *) = (ncclResult_t(*)(int *))find_real(CG_N_ncclGetVersion);
	int v = 0;
	return get && get(&v) == ncclSuccess ? v : 0;
}
