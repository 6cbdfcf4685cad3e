/* A stand-in libnvidia-ml.so.1 for the GPU counter tests: NVML's entry points that partrain's
 * counter source calls, with fixed readings (utilisation 42 %, SM clock 1980 MHz, 412.345 W,
 * clock event reasons 0x4), so a trace taken on a machine without a GPU holds known counters.
 *   FAKE_NVML_INIT_ERROR=N  nvmlInit_v2 returns N (and nvmlErrorString says "fake init error")
 *   FAKE_NVML_NO_POWER=1    nvmlDeviceGetPowerUsage is NVML_ERROR_NOT_SUPPORTED
 *   FAKE_NVML_LOG=FILE      each device handle asked for is appended: "handle N" */
#include <stdio.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

static struct nvmlDevice_st* const kDevices = (struct nvmlDevice_st*)0x1000;

EXPORT int nvmlInit_v2(void) {
  const char* error = getenv("FAKE_NVML_INIT_ERROR");
  return error != NULL ? atoi(error) : 0;
}

EXPORT int nvmlShutdown(void) { return 0; }

EXPORT const char* nvmlErrorString(int result) {
  return result == 0 ? "Success" : "fake init error";
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  const char* log = getenv("FAKE_NVML_LOG");
  if (log != NULL) {
    FILE* out = fopen(log, "a");
    if (out != NULL) {
      fprintf(out, "handle %u\n", index);
      fclose(out);
    }
  }
  if (index >= 8) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *device = (nvmlDevice_t)((char*)kDevices + index);
  return 0;
}

EXPORT int nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* rates) {
  (void)device;
  rates->gpu = 42;
  rates->memory = 17;
  return 0;
}

EXPORT int nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int* mhz) {
  (void)device;
  if (type != 1) return 2; /* only NVML_CLOCK_SM is asked for */
  *mhz = 1980;
  return 0;
}

EXPORT int nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  (void)device;
  if (getenv("FAKE_NVML_NO_POWER") != NULL) return 3; /* NVML_ERROR_NOT_SUPPORTED */
  *milliwatts = 412345;
  return 0;
}

EXPORT int nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                  unsigned long long* reasons) {
  (void)device;
  *reasons = 0x4ULL; /* SW power cap */
  return 0;
}
