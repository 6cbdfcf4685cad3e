/* A CUDA program as the CUPTI session sees one, for its tests: linked against the stand-in
 * libcupti (fake_cupti.c), it initialises CUDA the way cuInit reaches an injection library
 * (InitializeInjection, CUDA_INJECTION64_PATH), runs two kernels, and has its CUDA torn down as
 * the last thing before it returns from main, as a PyTorch program's libraries do before the
 * tracer's atexit handler runs. Prints what it did; exit 0. */
#include <dlfcn.h>
#include <stdio.h>

void fake_cupti_kernel(const char* name);
void fake_cupti_cuda_torn_down(void);

int main(void) {
  int (*initialize)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
  printf("InitializeInjection %s\n", initialize == NULL  ? "absent"
                                     : initialize() == 1 ? "ok"
                                                         : "failed");
  fake_cupti_kernel("forward_kernel");
  fake_cupti_kernel("last_kernel"); /* still in CUPTI's hands at exit */
  fake_cupti_cuda_torn_down();
  printf("done\n");
  return 0;
}
