// Asking for a CUDA device where none can be had: a Status naming the CUDA call and its error (or
// saying the build has no CUDA), never a crash. On a machine with a GPU these are skipped; the
// GPU's own tests are tests/gpu/cuda_device_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "runner/device/cuda_device.h"

namespace partrain::runner {
namespace {

TEST(CudaDeviceAvailability, NoUsableGpuIsAStatusNamingTheCudaCall) {
  StatusOr<int> visible = visible_cuda_devices();
  if (visible.is_ok() && *visible > 0) GTEST_SKIP() << *visible << " GPU(s) visible";
  StatusOr<std::unique_ptr<Device>> device = create_cuda_device({});
  ASSERT_FALSE(device.is_ok());
  const std::string& message = device.status().message();
#ifdef PARTRAIN_HAVE_CUDA
  EXPECT_NE(message.find("cudaGetDeviceCount"), std::string::npos) << message;
  if (!visible.is_ok()) {
    // The same CUDA error both ways, with CUDA's own name for it ("(cudaErrorNoDevice)").
    EXPECT_EQ(message, visible.status().message());
    EXPECT_NE(message.find("(cudaError"), std::string::npos) << message;
  }
#else
  EXPECT_NE(message.find("built without CUDA"), std::string::npos) << message;
  EXPECT_EQ(message, visible.status().message());
#endif
}

TEST(CudaDeviceAvailability, NegativeOrdinalIsRefused) {
  StatusOr<std::unique_ptr<Device>> device = create_cuda_device({.ordinal = -1});
  ASSERT_FALSE(device.is_ok());
#ifdef PARTRAIN_HAVE_CUDA
  EXPECT_EQ(device.status().code(), StatusCode::kInvalidArgument) << device.status().message();
  EXPECT_NE(device.status().message().find("-1"), std::string::npos) << device.status().message();
#endif
}

}  // namespace
}  // namespace partrain::runner
