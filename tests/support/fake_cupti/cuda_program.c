/* A CUDA program as the CUPTI session sees one, for its tests: linked against the stand-in
 * libcupti (fake_cupti.c), it initialises CUDA the way cuInit reaches an injection library
 * (InitializeInjection, CUDA_INJECTION64_PATH), runs two kernels, and has its CUDA torn down as
 * the last thing before it returns from main, as a PyTorch program's libraries do before the
 * tracer's atexit handler runs. Prints what it did; exit 0.
 * FAKE_CUPTI_BURST=N first runs N kernels named as a PyTorch program's are (templated names of
 * about 400 bytes), all in CUPTI's hands until one flush hands them over. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fake_cupti_kernel(const char* name);
void fake_cupti_cuda_torn_down(void);

int main(void) {
  int (*initialize)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "InitializeInjection");
  printf("InitializeInjection %s\n", initialize == NULL  ? "absent"
                                     : initialize() == 1 ? "ok"
                                                         : "failed");
  const char* burst = getenv("FAKE_CUPTI_BURST");
  const int burst_kernels = burst == NULL ? 0 : atoi(burst);
  for (int i = 0; i < burst_kernels; ++i) {
    char name[512];
    int length = snprintf(name, sizeof name, "void at::native::elementwise_kernel_%d<", i % 29);
    memset(name + length, 'T', sizeof name - (size_t)length - 2);
    name[sizeof name - 2] = '>';
    name[sizeof name - 1] = '\0';
    fake_cupti_kernel(name);
  }
  fake_cupti_kernel("forward_kernel");
  fake_cupti_kernel("last_kernel"); /* still in CUPTI's hands at exit */
  fake_cupti_cuda_torn_down();
  printf("done\n");
  return 0;
}
