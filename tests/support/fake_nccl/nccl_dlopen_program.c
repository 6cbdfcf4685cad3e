/* The NCCL program of nccl_program.c, loaded the way PyTorch loads NCCL: its code (built as a
 * shared library that needs libnccl.so.2) is opened with dlopen(RTLD_LOCAL), as Python opens an
 * extension module, so libnccl is in that library's private scope and not in the global one.
 * `nccl_dlopen_program LIBRARY RANK NRANKS`; the exit code and output are nccl_program's. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: nccl_dlopen_program LIBRARY RANK NRANKS\n");
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    fprintf(stderr, "nccl_dlopen_program: %s\n", dlerror());
    return 2;
  }
  int (*program)(int, char**) = (int (*)(int, char**))dlsym(library, "nccl_program_main");
  if (program == NULL) {
    fprintf(stderr, "nccl_dlopen_program: %s\n", dlerror());
    return 2;
  }
  argv[1] = argv[0];
  return program(argc - 1, argv + 1);
}
