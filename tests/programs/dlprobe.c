/* dlprobe: how a program learns whether CUDA is there without linking it: dlsym(RTLD_DEFAULT)
 * of driver functions, before and after it loads libcuda itself. Prints what it found
 * (`before N`, `after N`: how many of the names) and `checksum <hex>` of the answers.
 * usage: dlprobe */
#include <dlfcn.h>
#include <stdio.h>

static const char *const names[] = { "cuInit", "cuLaunchKernel", "cuLaunchKernelEx", "cuMemAlloc_v2",
                                     "cuStreamSynchronize", "cuCtxSynchronize", "cuGetProcAddress",
                                     "cuMemsetD32Async", "cuGraphLaunch", "cuModuleLoadData",
                                     "cuDriverGetVersion", "cuEventRecord", "cuStreamCreate" };

static int probe(unsigned long long *h)
{
  int found = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    dlerror();
    void *p = dlsym(RTLD_DEFAULT, names[i]);
    int err = dlerror() != NULL;
    found += p != NULL;
    *h = (*h ^ (unsigned long long)(p != NULL) << 1 ^ (unsigned long long)err) * 1099511628211ULL;
  }
  return found;
}

int main(void)
{
  unsigned long long h = 14695981039346656037ULL;
  printf("before %d\n", probe(&h));
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  printf("loaded %d\n", cuda != NULL);
  printf("after %d\n", probe(&h));
  printf("checksum %016llx\n", h);
  return 0;
}
