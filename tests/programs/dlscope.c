/* dlsym and dlvsym as glibc answers them: libdlscope_a, opened RTLD_LOCAL, looks up its own
 * dependency with RTLD_DEFAULT and RTLD_NEXT (dlscope_a.c); the program looks up through its
 * handle, and fetches cuLaunchKernel from libcuda both ways (the shim hands out its wrapper).
 * Prints "key value" lines; under the shim only the cuda.* lines may differ.
 * usage: dlscope PATH-OF-libdlscope_a.so */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char *found(void *p) { return p ? "found" : "none"; }

static const char *where(void *p)
{
  Dl_info info;
  if (!p) return "none";
  if (dladdr(p, &info) && info.dli_fname && strstr(info.dli_fname, "libcuda.so")) return "libcuda";
  return "elsewhere";
}

int main(int argc, char **argv)
{
  void *a = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
  void (*report)(void) = NULL;
  if (a) *(void **)&report = dlsym(a, "dlscope_a_report");
  if (!report) {
    fprintf(stderr, "dlscope: cannot load %s: %s\n", argc > 1 ? argv[1] : "(no path)", dlerror());
    return 1;
  }
  report();
  void *b = dlsym(a, "dlscope_b_func");
  printf("main.handle %s\n", found(b));
  printf("main.vhandle %s\n", dlvsym(a, "dlscope_b_func", "DLSCOPE_1") == b ? "same" : "differs");
  printf("main.default %s\n", found(dlsym(RTLD_DEFAULT, "dlscope_b_func")));
  /* A failed lookup's message names the object it was made from: the program, not libcugraft. */
  dlsym(RTLD_DEFAULT, "dlscope_nowhere");
  const char *err = dlerror();
  printf("main.error %s\n", err ? err : "none");

  /* The fake driver's entry points carry the version FAKECUDA (tests/fakecuda/exports.map). */
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!cuda) {
    fprintf(stderr, "dlscope: no libcuda.so.1: %s\n", dlerror());
    return 1;
  }
  void *l = dlsym(cuda, "cuLaunchKernel");
  printf("cuda.dlsym %s\n", where(l));
  printf("cuda.dlvsym %s\n", dlvsym(cuda, "cuLaunchKernel", "FAKECUDA") == l ? "same" : "differs");
  printf("cuda.vdefault %s\n", dlvsym(RTLD_DEFAULT, "cuLaunchKernel", "FAKECUDA") == l ? "same" : "differs");
  printf("checksum 0\n");
  return 0;
}
