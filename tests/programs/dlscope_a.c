/* libdlscope_a: opened RTLD_LOCAL by dlscope.c, as Python opens an extension module. It looks up
 * its own dependency (libdlscope_b) with RTLD_DEFAULT and RTLD_NEXT, through dlsym and dlvsym;
 * glibc answers those from the caller's scope, which a preloaded library must not change. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

const char *dlscope_who(void);
int dlscope_b_func(void);
void dlscope_a_report(void);

/* Defined here and in libdlscope_b: RTLD_NEXT from here must find libdlscope_b's. */
const char *dlscope_who(void) { return "a"; }

static const char *is_b(void *p) { return !p ? "none" : p == (void *)dlscope_b_func ? "b_func" : "other"; }

static const char *who(void *p) { return p ? ((const char *(*)(void))p)() : "none"; }

void dlscope_a_report(void)
{
  printf("a.default %s\n", is_b(dlsym(RTLD_DEFAULT, "dlscope_b_func")));
  printf("a.vdefault %s\n", is_b(dlvsym(RTLD_DEFAULT, "dlscope_b_func", "DLSCOPE_1")));
  printf("a.vdefault_wrong %s\n", is_b(dlvsym(RTLD_DEFAULT, "dlscope_b_func", "DLSCOPE_9")));
  printf("a.next %s\n", who(dlsym(RTLD_NEXT, "dlscope_who")));
  printf("a.vnext %s\n", who(dlvsym(RTLD_NEXT, "dlscope_who", "DLSCOPE_1")));
}
