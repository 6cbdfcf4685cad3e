// Choosing a workload's device and communicator (runner/workload/workload_device.h): the
// combinations that are refused before any rank starts (exit 2, naming the fix), what auto picks,
// and the CPU device a worker creates. The no-GPU cases check this machine's CUDA error; on a
// machine with a GPU they are skipped (tests/gpu covers that side).
#include "runner/workload/workload_device.h"

#include <gtest/gtest.h>

#include "runner/device/cpu_device.h"
#include "runner/device/cuda_device.h"

namespace partrain::runner {
namespace {

bool gpu_visible() {
  StatusOr<int> gpus = visible_cuda_devices();
  return gpus.is_ok() && *gpus > 0;
}

TEST(WorkloadDevice, CpuWithGlooOrAutoIsGloo) {
  for (const char* comm : {"gloo", "auto"}) {
    auto choice = choose_device("cpu", comm, 4);
    ASSERT_TRUE(choice.is_ok()) << choice.status().message();
    EXPECT_EQ(choice->device, "cpu");
    EXPECT_EQ(choice->comm, "gloo");
    EXPECT_EQ(choice->notice, "");
  }
}

TEST(WorkloadDevice, NcclNeedsTheCudaDevice) {
  auto choice = choose_device("cpu", "nccl", 1);
  ASSERT_FALSE(choice.is_ok());
  EXPECT_EQ(choice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(choice.status().message().find("--comm nccl needs the CUDA device"),
            std::string::npos)
      << choice.status().message();
  EXPECT_NE(choice.status().message().find("--comm gloo"), std::string::npos);
}

TEST(WorkloadDevice, UnknownNamesAreRefused) {
  EXPECT_EQ(choose_device("tpu", "gloo", 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(choose_device("cpu", "mpi", 1).status().code(), StatusCode::kInvalidArgument);
}

TEST(WorkloadDevice, CudaWithoutAGpuNamesTheCudaError) {
  if (gpu_visible()) GTEST_SKIP() << "a GPU is visible: this checks the machine without one";
  auto choice = choose_device("cuda", "auto", 1);
  ASSERT_FALSE(choice.is_ok());
  EXPECT_EQ(choice.status().code(), StatusCode::kInvalidArgument);  // exit 2
  const std::string& message = choice.status().message();
  EXPECT_NE(message.find("--device cuda: no usable GPU: "), std::string::npos) << message;
  // The CUDA runtime's own account (or, in a build without CUDA, that there is none).
  EXPECT_TRUE(message.find("cudaGetDeviceCount") != std::string::npos ||
              message.find("built without CUDA") != std::string::npos)
      << message;
  EXPECT_NE(message.find("--device cpu"), std::string::npos);
}

TEST(WorkloadDevice, AutoWithoutAGpuTrainsOnTheCpuAndSaysWhy) {
  if (gpu_visible()) GTEST_SKIP() << "a GPU is visible: this checks the machine without one";
  auto choice = choose_device("auto", "auto", 4);
  ASSERT_TRUE(choice.is_ok()) << choice.status().message();
  EXPECT_EQ(choice->device, "cpu");
  EXPECT_EQ(choice->comm, "gloo");
  EXPECT_TRUE(choice->notice.starts_with("--device auto: no GPU (")) << choice->notice;
  EXPECT_NE(choice->notice.find("running on the CPU"), std::string::npos);
}

TEST(WorkloadDevice, TheCpuDeviceHasTheConfiguredBlasThreads) {
  WorkloadConfig config;
  config.device = "cpu";
  config.blas_threads = 2;
  auto device = create_workload_device(config, 3);
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  auto* cpu = dynamic_cast<CpuDevice*>(device->get());
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->blas_threads(), 2);
  EXPECT_EQ((*device)->compute_stream(), nullptr);  // host memory: nothing to stage or order

  config.device = "auto";  // the launcher resolves auto; a worker never sees it
  EXPECT_EQ(create_workload_device(config, 0).status().code(), StatusCode::kInvalidArgument);
}

// The isolated CPU device checks a workload's device discipline on any machine: Gloo only (staged
// through the host, as for a GPU), and its own device in the worker.
TEST(WorkloadDevice, CpuIsolatedRunsGlooOnItsOwnDevice) {
  for (const char* comm : {"gloo", "auto"}) {
    auto choice = choose_device("cpu-isolated", comm, 8);
    ASSERT_TRUE(choice.is_ok()) << choice.status().message();
    EXPECT_EQ(choice->device, "cpu-isolated");
    EXPECT_EQ(choice->comm, "gloo");
    EXPECT_EQ(choice->notice, "");
  }
  auto nccl = choose_device("cpu-isolated", "nccl", 1);
  ASSERT_FALSE(nccl.is_ok());
  EXPECT_EQ(nccl.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(nccl.status().message().find("pass --comm gloo"), std::string::npos)
      << nccl.status().message();

  WorkloadConfig config;
  config.device = "cpu-isolated";
  auto device = create_workload_device(config, 0);
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  EXPECT_FALSE((*device)->host_addressable());
  EXPECT_TRUE((*device)->name().starts_with("cpu-isolated ")) << (*device)->name();
}

}  // namespace
}  // namespace partrain::runner
