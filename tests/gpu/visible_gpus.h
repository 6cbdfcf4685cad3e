// What the GPU tests skip on: how many GPUs CUDA sees, and why none when it sees none. A skip's
// message starts "no GPU visible" (gpu-validate.sh and the bundle test read it as a skip).
#pragma once

#include <string>

#include "runner/device/cuda_device.h"

namespace partrain::testing {

// "" when a GPU is visible, else "no GPU visible: <CUDA's reason>".
inline std::string no_gpu_reason() {
  StatusOr<int> count = runner::visible_cuda_devices();
  if (!count.is_ok()) return "no GPU visible: " + count.status().message();
  if (*count == 0) return "no GPU visible: cudaGetDeviceCount found 0 devices";
  return "";
}

inline int visible_gpus() {
  StatusOr<int> count = runner::visible_cuda_devices();
  return count.is_ok() ? *count : 0;
}

}  // namespace partrain::testing
