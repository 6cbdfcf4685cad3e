// The CUDA device's entry points in a build without CUDA (PARTRAIN_CUDA=OFF, or no toolkit found
// at configure time): they fail with a Status saying so, so CPU-only code can ask for a GPU and
// tell the user why there is none. CUDA builds define them in cuda_device_cuda.cpp instead.
#ifndef PARTRAIN_HAVE_CUDA

#include "runner/device/cuda_device.h"

namespace partrain::runner {
namespace {

Status built_without_cuda() {
  return failed(
      "this partrain was built without CUDA (PARTRAIN_CUDA=OFF or no toolkit at configure time)");
}

}  // namespace

StatusOr<int> visible_cuda_devices() { return built_without_cuda(); }

StatusOr<std::unique_ptr<Device>> create_cuda_device(const CudaDeviceOptions& /*options*/) {
  return built_without_cuda();
}

}  // namespace partrain::runner

#endif  // PARTRAIN_HAVE_CUDA
