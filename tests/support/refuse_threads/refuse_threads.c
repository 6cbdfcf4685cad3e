// A host that refuses new threads (RLIMIT_NPROC, a cgroup's pids.max), for tests: RLIMIT_NPROC
// does not bind root, which CI containers often run as. Preloaded, pthread_create fails with
// EAGAIN (what clone gives at the limit) in every process whose environment has
// PARTRAIN_TEST_REFUSE_THREADS=all, or =ranks and RANK set (the launched ranks, not the launcher
// that starts them); elsewhere it is glibc's.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef int (*CreateFn)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

static int refused_here(void) {
  const char* mode = getenv("PARTRAIN_TEST_REFUSE_THREADS");
  if (mode == NULL) return 0;
  return strcmp(mode, "all") == 0 || (strcmp(mode, "ranks") == 0 && getenv("RANK") != NULL);
}

__attribute__((visibility("default"))) int pthread_create(pthread_t* thread,
                                                          const pthread_attr_t* attr,
                                                          void* (*start)(void*), void* arg) {
  if (refused_here()) return EAGAIN;
  static CreateFn real = NULL;
  if (real == NULL) real = (CreateFn)dlsym(RTLD_NEXT, "pthread_create");
  return real(thread, attr, start, arg);
}
