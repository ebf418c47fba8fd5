/* Boundary wrappers, generated from cuda.def: count the call, flush the pending work the call
 * could observe (and cut the learned chunk there), then forward unchanged; a wait (a sync, a
 * copy to or from the host) is timed from there to its return (hooktime.h). Also the table of our
 * exported wrappers, which driver.c hands out instead of the real entry points. */
#include "shim/loader/counts.h"
#include "shim/loader/driver.h"
#include "policy/clock.h"
#include "shim/base/shim.h"
#include "shim/observers/hooktime.h"
#include "shim/streams/registry.h"

enum scope { SCOPE_STREAM, SCOPE_PTSZ, SCOPE_ALL }; /* cuda.def's scope of a boundary */

/* A boundary ordered on one stream, other than a wait (syncs and copies: the deferral
 * controller times them, and they mark the chunk launched before them), changes nothing while
 * the process is settled (cg_unsettled, shim.h: no stream has work deferred or ops since its
 * last boundary, no hand-back is outstanding, no cost-gate sample in flight, the shim is started
 * and neither disabled, auditing nor profiling). Such a call is counted (CG_COUNT_FORWARD: the
 * report adds it to its entry point and its kind of boundary) and forwarded, one load and a tail
 * call, where the full path would count it, find nothing to do and forward it. cg_tls.api is left
 * as it was: nothing reads it before the thread's next call into the shim, which sets its own.
 * Not a call the shim makes itself or NCCL makes inside a collective, nor a thread's first
 * (cg_count_forwarded). The program's graph launches (hooks.c) take the same path. */
#define CG_FORWARDS_STREAM(reason) (!cg_reason_waits(CG_R_##reason))
#define CG_FORWARDS_PTSZ(reason) CG_FORWARDS_STREAM(reason)
#define CG_FORWARDS_ALL(reason) 0 /* every stream's chunk is cut: the full path, always */

/* The short path: true where the call was counted and is to be forwarded straight away. */
static inline bool forwarded_settled(enum cg_entry e, bool forwards)
{
	struct cg_counts *c;
	if (!forwards || !(c = cg_count_forwarded()) || !cg_real[e])
		return false;
	cg_count_in(c, CG_COUNT_FORWARD + e);
	return true;
}

/* Syncs and stream queries report what CUDA reports asynchronously: here, the error of deferred
 * work whose eager submission failed after the program was told it was submitted (shim.h). */
static inline bool reports_deferred_error(enum cg_reason why)
{
	return why == CG_R_SYNC || why == CG_R_QUERY;
}

/* What the full path does once its boundary is made. */
enum boundary_route {
	BOUNDARY_MISSING, /* the driver lacks the entry point: CUDA_ERROR_NOT_FOUND */
	BOUNDARY_FORWARD, /* forwarded, a tail call: nothing to mark, nothing to report */
	BOUNDARY_MARKED,  /* forwarded with the audit's mark (CG_FORWARDED), then boundary_result */
};

/* A wait of the program (hooktime.h): when it began (0: no wait) and the deferred work this
 * thread had submitted by then. */
struct wait {
	uint64_t t0, submits;
};

/* The full path up to the real call: counted and the boundary made, unless the call must pass
 * through untouched; then its route. `*w`: the wait it is, if it is one. */
static enum boundary_route boundary_route(enum cg_entry e, enum scope scope, CUstream h,
                                          enum cg_reason why, struct wait *w)
{
	cg_driver_init(); /* also when disabled: it finds the real entry point */
	if (!cg_shim_passthrough() && cg_driver_ready()) {
		if (cg_reason_waits(why))  /* a wait of the program: timed (hooktime.h) */
			*w = (struct wait){ cg_monotonic_ns(), cg_tls.hooktime.submits };
		cg_count(CG_COUNT_ENTRY + e);
		cg_tls.api = cg_entry_name[e];
		if (scope == SCOPE_ALL)
			cg_boundary_all(why);
		else
			cg_boundary_stream(h, scope == SCOPE_PTSZ, why);
	}
	if (!cg_real[e])
		return BOUNDARY_MISSING;
	if (!cg_shim.auditing && !reports_deferred_error(why))
		return BOUNDARY_FORWARD;
	return BOUNDARY_MARKED;
}

/* The real call's answer r, or the error of deferred work for a sync or a query. */
static CUresult boundary_result(CUresult r, enum cg_reason why)
{
	return reports_deferred_error(why) ? (CUresult)cg_shim_deferred_error(r) : r;
}

/* The full path's answer r, once the wait w (if it is one) is timed. */
static CUresult boundary_done(CUresult r, const struct wait *w)
{
	if (w->t0)
		cg_hooktime_waited(w->t0, cg_tls.hooktime.submits != w->submits);
	return r;
}

#define CG_PURE(n)
#define CG_HOOK(n, ...)
/* The full path, a function of its own: the forwarded path saves no registers. */
#define CG_BOUNDARY(n, proto, params, args, scope, stream, reason)                             \
	__attribute__((noinline)) static CUresult full_##n params                               \
	{                                                                                       \
		struct wait w_ = { 0, 0 };                                                      \
		switch (boundary_route(CG_E_##n, SCOPE_##scope, (CUstream)(stream), CG_R_##reason, &w_)) { \
		case BOUNDARY_MISSING: return CUDA_ERROR_NOT_FOUND;                             \
		case BOUNDARY_FORWARD: return boundary_done(CG_REAL(n) args, &w_);              \
		case BOUNDARY_MARKED: break;                                                    \
		}                                                                               \
		return boundary_done(boundary_result(CG_FORWARDED(CG_REAL(n) args), CG_R_##reason), &w_); \
	}
#include "shim/loader/cuda.def"
#undef CG_BOUNDARY
/* The exported wrapper (declared in driver.h). */
#define CG_BOUNDARY(n, proto, params, args, scope, stream, reason)                             \
	CG_EXPORT CUresult n params                                                             \
	{                                                                                       \
		if (forwarded_settled(CG_E_##n, CG_FORWARDS_##scope(reason)))                   \
			return CG_REAL(n) args;                                                 \
		return full_##n args;                                                           \
	}
#include "shim/loader/cuda.def"
#undef CG_BOUNDARY
#undef CG_HOOK
#undef CG_PURE

/* Our wrapper for every non-pure entry (declared in driver.h): boundary wrappers above, hooks
 * in launch.c/hooks.c. */
void *const cg_wrapper[CG_E_COUNT] = {
#define CG_PURE(n)
#define CG_BOUNDARY(n, ...) [CG_E_##n] = (void *)n,
#define CG_HOOK(n, ...) [CG_E_##n] = (void *)n,
#include "shim/loader/cuda.def"
#undef CG_BOUNDARY
#undef CG_HOOK
#undef CG_PURE
};

/* Every wrapper's prototype must match cuda.h (driver.h declares them from the list). */
#define CG_PURE(n)
#define CG_BOUNDARY(n, proto, params, ...)                                                      \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&proto), CUresult(*) params),   \
	               #n " does not match the cuda.h prototype of " #proto);
#define CG_HOOK(n, proto, params, args)                                                         \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&proto), __typeof__(&n)),       \
	               #n " does not match the cuda.h prototype of " #proto);
#include "shim/loader/cuda.def"
#undef CG_BOUNDARY
#undef CG_HOOK
#undef CG_PURE
