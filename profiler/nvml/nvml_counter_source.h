// NVML as a GpuCounterSource: libnvidia-ml.so.1 loaded with dlopen (never linked, so partrain
// runs where no driver is installed), initialised once, and read for one device.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "profiler/gpu_counter_sampler.h"

namespace partrain::profiler {

// The NVML device of CUDA device `cuda_device` in this process: CUDA_VISIBLE_DEVICES[cuda_device]
// when that is set and the entry is an index, else `cuda_device` (NVML numbers devices as the
// driver does, ignoring CUDA_VISIBLE_DEVICES; a process on GPU UUIDs or MIG slices gets
// `cuda_device`).
int nvml_device_for_cuda_device(int cuda_device);

// The NVML device of a process whose CUDA device is not known (a foreign program): that of CUDA
// device LOCAL_RANK (the launchers' convention), else 0.
int nvml_device_for_process();

// kUnavailable when libnvidia-ml.so.1 is not there (no driver: nothing to say), kFailed naming
// NVML's error when it is there but cannot be initialised or has no device `index`.
StatusOr<std::unique_ptr<GpuCounterSource>> open_nvml_counter_source(int index);

}  // namespace partrain::profiler
