/* Boundary wrappers, generated from cuda.def: count the call, flush the pending work the call
 * could observe (and cut the learned chunk there), then forward unchanged. Also the table of our
 * exported wrappers, which driver.c hands out instead of the real entry points. */
#include "counts.h"
#include "driver.h"
#include "shim.h"
#include "stream.h"

#define CG_SCOPE_STREAM(h, why) cg_boundary_stream((CUstream)(h), false, why)
#define CG_SCOPE_PTSZ(h, why) cg_boundary_stream((CUstream)(h), true, why)
#define CG_SCOPE_ALL(h, why) cg_boundary_all(why)

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
#define CG_FORWARDS_STREAM(reason) (CG_R_##reason != CG_R_SYNC && CG_R_##reason != CG_R_HOST_COPY)
#define CG_FORWARDS_PTSZ(reason) CG_FORWARDS_STREAM(reason)
#define CG_FORWARDS_ALL(reason) 0 /* every stream's chunk is cut: the full path, always */

/* Syncs and stream queries report what CUDA reports asynchronously: here, the error of deferred
 * work whose eager submission failed after the program was told it was submitted (shim.h). */
#define CG_REPORTS(reason) (CG_R_##reason == CG_R_SYNC || CG_R_##reason == CG_R_QUERY)

#define CG_PURE(n)
#define CG_HOOK(n, ...)
#define CG_BOUNDARY(n, proto, params, args, scope, stream, reason)                             \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&proto), CUresult(*) params),   \
	               #n " does not match the cuda.h prototype of " #proto);                   \
	/* The full path, a function of its own: the forwarded path saves no registers. */      \
	__attribute__((noinline)) static CUresult full_##n params                               \
	{                                                                                       \
		cg_driver_init(); /* also when disabled: it finds the real entry point */       \
		if (!cg_shim_passthrough()) {                                                   \
			if (cg_driver_ready()) {                                                \
				cg_count(CG_COUNT_ENTRY + CG_E_##n);                            \
				cg_tls.api = #n;                                                 \
				CG_SCOPE_##scope(stream, CG_R_##reason);                        \
			}                                                                       \
		}                                                                               \
		if (!cg_real[CG_E_##n])                                                         \
			return CUDA_ERROR_NOT_FOUND;                                            \
		if (!cg_shim.auditing && !CG_REPORTS(reason)) /* nothing to mark: a tail call */ \
			return ((__typeof__(&proto))cg_real[CG_E_##n]) args;                    \
		cg_tls.forwarding++;                                                             \
		CUresult r_ = ((__typeof__(&proto))cg_real[CG_E_##n]) args;                     \
		cg_tls.forwarding--;                                                             \
		return CG_REPORTS(reason) ? (CUresult)cg_shim_deferred_error(r_) : r_;          \
	}                                                                                       \
	CUresult n params;                                                                      \
	CG_EXPORT CUresult n params                                                             \
	{                                                                                       \
		struct cg_counts *c_;                                                           \
		if (CG_FORWARDS_##scope(reason) && (c_ = cg_count_forwarded()) &&               \
		    cg_real[CG_E_##n]) {                                                        \
			cg_count_in(c_, CG_COUNT_FORWARD + CG_E_##n);                           \
			return ((__typeof__(&proto))cg_real[CG_E_##n]) args;                    \
		}                                                                               \
		return full_##n args;                                                           \
	}
#include "cuda.def"
#undef CG_BOUNDARY
#undef CG_HOOK
#undef CG_PURE

/* Our wrapper for every non-pure entry (declared in driver.h): boundary wrappers above, hooks
 * in launch.c/hooks.c. */
void *const cg_wrapper[CG_E_COUNT] = {
#define CG_PURE(n)
#define CG_BOUNDARY(n, ...) [CG_E_##n] = (void *)n,
#define CG_HOOK(n, ...) [CG_E_##n] = (void *)n,
#include "cuda.def"
#undef CG_BOUNDARY
#undef CG_HOOK
#undef CG_PURE
};

/* The hooks' prototypes must match cuda.h too. */
#define CG_PURE(n)
#define CG_BOUNDARY(n, ...)
#define CG_HOOK(n, proto, params, args)                                                         \
	_Static_assert(__builtin_types_compatible_p(__typeof__(&proto), __typeof__(&n)),       \
	               #n " does not match the cuda.h prototype of " #proto);
#include "cuda.def"
#undef CG_BOUNDARY
#undef CG_HOOK
#undef CG_PURE
