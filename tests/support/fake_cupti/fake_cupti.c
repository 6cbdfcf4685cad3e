/* A stand-in libcupti for the CUPTI session's tests, so its life in a traced process (start,
 * flushes, the end at exit) runs on a machine without a GPU. It has the entry points partrain's
 * session calls, with CUPTI's own declarations (cupti.h), and keeps what a program's CUDA did:
 *   fake_cupti_kernel(name)     a kernel ran just now (start and end on the fake's own clock,
 *                               CLOCK_REALTIME as CUPTI's is Unix time, or the session's
 *                               timestamp callback if one was registered); its record is handed
 *                               over at the next flush. cuptiGetTimestamp reads the same clock
 *   fake_cupti_cuda_torn_down() the program's CUDA is gone, as a PyTorch program's is when the
 *                               libraries loaded after the tracer tear it down at exit. From then
 *                               on cuptiActivityDisable, cuptiUnsubscribe and cuptiEnableCallback
 *                               abort the process: the real libcupti crashes in them (SIGSEGV in
 *                               cuptiActivityDisable, CUDA 13.0 on an H200, 2026-11-26); a flush
 *                               still works, as it does there.
 *   FAKE_CUPTI_LOG=FILE         each entry point called is appended to FILE, one name a line
 *                               (cuptiEnableCallback's with "on" or "off"), and "torn down" where
 *                               the teardown happened.
 *   FAKE_CUPTI_TAKEN=1|NAME     another profiler holds CUPTI (cuptiSubscribe_v2 names it NAME,
 *                               none for 1): cuptiSubscribe and _v2 fail with
 *                               CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, as it does under
 *                               nsys or torch.profiler.
 *   FAKE_CUPTI_V2_REFUSES=1     cuptiSubscribe_v2 fails with CUPTI_ERROR_INVALID_PARAMETER, as a
 *                               CUPTI might whose parameters differ from this build's. */
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

enum { kMaxPending = 8192 };

static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static CUpti_BuffersCallbackRequestFunc g_request = NULL;
static CUpti_BuffersCallbackCompleteFunc g_complete = NULL;
static CUpti_TimestampCallbackFunc g_timestamp = NULL;
static CUpti_ActivityKernel10 g_pending[kMaxPending];
static int g_pending_count = 0;
static uint32_t g_correlation = 0;
static int g_torn_down = 0;

static void log_line(const char* line) {
  const char* path = getenv("FAKE_CUPTI_LOG");
  if (path == NULL) return;
  FILE* out = fopen(path, "a");
  if (out == NULL) return;
  fprintf(out, "%s\n", line);
  fclose(out);
}

/* An entry point that reaches the driver: called after the teardown, it ends the process. */
static void needs_cuda(const char* function) {
  log_line(function);
  if (!g_torn_down) return;
  fprintf(stderr,
          "fake libcupti: %s after the program's CUDA was torn down (the real one "
          "crashes here)\n",
          function);
  abort();
}

EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  (void)kind;
  log_line("cuptiActivityEnable");
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  (void)kind;
  needs_cuda("cuptiActivityDisable");
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc request, CUpti_BuffersCallbackCompleteFunc complete) {
  log_line("cuptiActivityRegisterCallbacks");
  g_request = request;
  g_complete = complete;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc timestamp) {
  log_line("cuptiActivityRegisterTimestampCallback");
  g_timestamp = timestamp;
  return CUPTI_SUCCESS;
}

/* Hands the pending kernel records over in one buffer, as CUPTI does on a flush. */
EXPORT CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  log_line("cuptiActivityFlushAll");
  pthread_mutex_lock(&g_mutex);
  if (g_pending_count == 0 || g_request == NULL || g_complete == NULL) {
    pthread_mutex_unlock(&g_mutex);
    return CUPTI_SUCCESS;
  }
  uint8_t* buffer = NULL;
  size_t size = 0;
  size_t max_records = 0;
  g_request(&buffer, &size, &max_records);
  size_t valid = 0;
  if (buffer != NULL) {
    int fit = (int)(size / sizeof(CUpti_ActivityKernel10));
    if (fit > g_pending_count) fit = g_pending_count;
    valid = (size_t)fit * sizeof(CUpti_ActivityKernel10);
    memcpy(buffer, g_pending, valid);
  }
  g_pending_count = 0; /* refused buffers drop their records, as CUPTI's do */
  pthread_mutex_unlock(&g_mutex);
  if (buffer != NULL) g_complete(NULL, 0, buffer, size, valid);
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                       CUpti_Activity** record) {
  uint8_t* next = *record == NULL ? buffer : (uint8_t*)*record + sizeof(CUpti_ActivityKernel10);
  if (next + sizeof(CUpti_ActivityKernel10) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = (CUpti_Activity*)next;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t stream,
                                                              size_t* dropped) {
  (void)context;
  (void)stream;
  *dropped = 0;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI
cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  (void)kind;
  (void)id;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI
cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind kind, uint64_t* last) {
  (void)kind;
  *last = 0;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                              CUpti_CallbackFunc callback, void* userdata,
                                              CUpti_SubscriberParams* params) {
  (void)callback;
  (void)userdata;
  char line[128];
  snprintf(line, sizeof line, "cuptiSubscribe_v2 %s",
           params != NULL && params->subscriberName != NULL ? params->subscriberName : "(none)");
  log_line(line);
  if (getenv("FAKE_CUPTI_V2_REFUSES") != NULL) return CUPTI_ERROR_INVALID_PARAMETER;
  const char* taken = getenv("FAKE_CUPTI_TAKEN");
  if (taken != NULL) {
    if (strcmp(taken, "1") != 0 && params != NULL && params->oldSubscriberName != NULL &&
        params->oldSubscriberSize > 0) {
      snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", taken);
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  *subscriber = (CUpti_SubscriberHandle)0x1000;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                           CUpti_CallbackFunc callback, void* userdata) {
  (void)callback;
  (void)userdata;
  log_line("cuptiSubscribe");
  if (getenv("FAKE_CUPTI_TAKEN") != NULL) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  *subscriber = (CUpti_SubscriberHandle)0x1000;
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  (void)subscriber;
  needs_cuda("cuptiUnsubscribe");
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                                CUpti_CallbackDomain domain,
                                                CUpti_CallbackId callback) {
  (void)subscriber;
  (void)domain;
  (void)callback;
  needs_cuda(enable ? "cuptiEnableCallback on" : "cuptiEnableCallback off");
  return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** text) {
  *text = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "fake CUPTI error";
  return CUPTI_SUCCESS;
}

/* CUPTI's clock: Unix-time nanoseconds, far from the monotonic clock's, so a session that forgets
 * to convert places its kernels decades away from their run. */
static uint64_t fake_clock(void) {
  if (g_timestamp != NULL) return g_timestamp();
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

EXPORT CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  log_line("cuptiGetTimestamp");
  *timestamp = fake_clock();
  return CUPTI_SUCCESS;
}

EXPORT void fake_cupti_kernel(const char* name) {
  pthread_mutex_lock(&g_mutex);
  if (g_pending_count < kMaxPending) {
    CUpti_ActivityKernel10* kernel = &g_pending[g_pending_count++];
    memset(kernel, 0, sizeof *kernel);
    kernel->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    kernel->name = strdup(name);
    kernel->start = fake_clock();
    kernel->end = kernel->start + 1000;
    kernel->streamId = 7;
    kernel->correlationId = ++g_correlation;
    kernel->gridX = kernel->gridY = kernel->gridZ = 1;
    kernel->blockX = 128;
    kernel->blockY = kernel->blockZ = 1;
  }
  pthread_mutex_unlock(&g_mutex);
}

EXPORT void fake_cupti_cuda_torn_down(void) {
  log_line("torn down");
  g_torn_down = 1;
}
