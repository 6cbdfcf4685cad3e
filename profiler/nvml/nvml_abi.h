// The part of NVML's C API (nvml.h, ABI-stable since the _v2 entry points) that the GPU counter
// source calls, mirrored so that partrain builds without the driver's headers and loads
// libnvidia-ml.so.1 with dlopen where a driver is installed.
#pragma once

#include <cstdint>

namespace partrain::profiler::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;           // NVML_SUCCESS
inline constexpr Return kErrorNotSupported = 3;  // NVML_ERROR_NOT_SUPPORTED

using Device = struct nvmlDevice_st*;  // nvmlDevice_t

struct Utilization {  // nvmlUtilization_t
  unsigned int gpu;     // percent of the last sample period a kernel was running
  unsigned int memory;  // percent of it device memory was read or written
};

inline constexpr int kClockSm = 1;  // NVML_CLOCK_SM of nvmlClockType_t

extern "C" {
using InitFn = Return (*)();                                      // nvmlInit_v2
using ShutdownFn = Return (*)();                                  // nvmlShutdown
using ErrorStringFn = const char* (*)(Return);                    // nvmlErrorString
using DeviceGetCountFn = Return (*)(unsigned int*);               // nvmlDeviceGetCount_v2
using DeviceGetHandleByIndexFn = Return (*)(unsigned int, Device*);  // ..._v2
using DeviceGetUtilizationRatesFn = Return (*)(Device, Utilization*);
using DeviceGetClockInfoFn = Return (*)(Device, int, unsigned int*);  // MHz
using DeviceGetPowerUsageFn = Return (*)(Device, unsigned int*);      // milliwatts
// nvmlDeviceGetCurrentClocksEventReasons (R535 on), formerly ...ClocksThrottleReasons.
using DeviceGetClockReasonsFn = Return (*)(Device, unsigned long long*);
}

}  // namespace partrain::profiler::nvml
