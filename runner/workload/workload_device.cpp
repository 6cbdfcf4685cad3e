#include "runner/workload/workload_device.h"

#include "runner/device/cpu_device.h"
#include "runner/device/cuda_device.h"
#include "runner/device/isolated_cpu_device.h"
#include "runner/device/openblas_library.h"

namespace partrain::runner {

StatusOr<DeviceChoice> choose_device(std::string_view device, std::string_view comm,
                                     int ranks_per_node) {
  RETURN_IF_ERROR(check_device_names(device, comm));
  DeviceChoice choice;
  if (device == "cpu-isolated") {
    if (comm == "nccl") {
      return invalid_argument("--comm nccl needs the CUDA device; --device cpu-isolated runs "
                              "Gloo, staged through host copies as for a GPU: pass --comm gloo");
    }
    return DeviceChoice{"cpu-isolated", "gloo", ""};
  }
  StatusOr<int> gpus = device == "cpu" ? StatusOr<int>(0) : visible_cuda_devices();
  const bool gpu_visible = gpus.is_ok() && *gpus > 0;
  if (device == "cuda") {
    if (!gpus.is_ok()) {
      return invalid_argument(
          "--device cuda: no usable GPU: {}; run on the CPU with --device "
          "cpu (or auto, which picks the GPU when there is one)",
          gpus.status().message());
    }
    if (*gpus == 0) {
      return invalid_argument("--device cuda: the CUDA runtime sees no GPU (is "
                              "CUDA_VISIBLE_DEVICES empty?); use --device cpu or auto");
    }
    choice.device = "cuda";
  } else if (device == "auto" && gpu_visible) {
    choice.device = "cuda";
  } else if (device == "auto") {
    choice.device = "cpu";
    choice.notice =
        fmt::format("--device auto: no GPU ({}), running on the CPU",
                    gpus.is_ok() ? "the CUDA runtime sees none" : gpus.status().message());
  } else {
    choice.device = "cpu";
  }
  choice.comm = comm == "auto" ? (choice.device == "cuda" ? "nccl" : "gloo") : std::string(comm);
  if (choice.comm == "nccl") {
    if (choice.device != "cuda") {
      return invalid_argument("--comm nccl needs the CUDA device (NCCL moves GPU memory): pass "
                              "--device cuda, or --comm gloo on the CPU");
    }
    if (ranks_per_node > *gpus) {
      return invalid_argument("--comm nccl runs one rank per GPU, and {} rank(s) per node were "
                              "asked for with {} GPU(s) visible: start at most {} per node (-n), "
                              "or use --comm gloo, which stages through host memory so that "
                              "ranks can share a GPU",
                              ranks_per_node, *gpus, *gpus);
    }
  }
  return choice;
}

StatusOr<std::unique_ptr<Device>> create_workload_device(const WorkloadConfig& config,
                                                         int local_rank) {
  const GemmPrecision precision =
      is_bf16(config.precision) ? GemmPrecision::kBf16 : GemmPrecision::kFp32;
  CpuDeviceOptions cpu_options;
  cpu_options.blas_threads = config.blas_threads;
  cpu_options.precision = precision;
  if (config.device.starts_with("cpu")) {
    // The rank opens OpenBLAS here, with a pool of its BLAS threads, or fails saying why.
    RETURN_IF_ERROR(openblas_library(config.blas_threads).status());
  }
  if (config.device == "cpu") {
    return std::unique_ptr<Device>(std::make_unique<CpuDevice>(cpu_options));
  }
  if (config.device == "cpu-isolated") {
    ASSIGN_OR_RETURN(std::unique_ptr<IsolatedCpuDevice> device,
                     IsolatedCpuDevice::create(cpu_options));
    return std::unique_ptr<Device>(std::move(device));
  }
  if (config.device != "cuda") {
    return invalid_argument("the workload's device '{}' was not resolved to cpu, cuda or "
                            "cpu-isolated",
                            config.device);
  }
  ASSIGN_OR_RETURN(int gpus, visible_cuda_devices());
  if (gpus < 1) return invalid_argument("--device cuda: the CUDA runtime sees no GPU");
  CudaDeviceOptions options;
  options.ordinal = local_rank % gpus;
  options.precision = precision;
  return create_cuda_device(options);
}

}  // namespace partrain::runner
