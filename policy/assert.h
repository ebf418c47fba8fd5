/* Invariants as assertions: CG_ASSERT(cond) checks in debug and sanitizer builds (the default
 * build, the test suites, CI) and compiles to nothing in release builds (NDEBUG: a wheel, a
 * -Dbuildtype=release install). A failed one names the condition and where, then aborts: an
 * engine that broke its own invariant may be about to run an op twice or lose one. */
#ifndef CG_POLICY_ASSERT_H
#define CG_POLICY_ASSERT_H

#ifndef NDEBUG
#define CG_ASSERT(cond) \
	(__builtin_expect(!!(cond), 1) ? (void)0 : cg_assert_failed(#cond, __FILE__, __LINE__))
#else
#define CG_ASSERT(cond) ((void)0)
#endif

__attribute__((noreturn, cold)) void cg_assert_failed(const char *cond, const char *file, int line);

#endif
