#include "runner/workload/workload_device.h"

#include "runner/device/cpu_device.h"
#include "runner/device/cuda_device.h"

namespace partrain::runner {
namespace {

// The CUDA device's ops are built and tested against the CPU (tests/gpu), but the workloads
// around them still touch host memory: parameters are initialised, batches filled and norms summed
// on the host (docs/decisions.md, 2026-11-25, lists the places). Until that is done a workload does
// not start on a GPU: --device cuda says why, and auto stays on the CPU.
constexpr bool kWorkloadsRunOnCuda = false;
constexpr std::string_view kWorkloadsNotOnCuda =
    "the built-in workloads do not run on the CUDA device yet (their parameters, batches and norms "
    "still live in host memory; docs/decisions.md)";

}  // namespace

StatusOr<DeviceChoice> choose_device(std::string_view device, std::string_view comm,
                                     int ranks_per_node) {
  RETURN_IF_ERROR(check_device_names(device, comm));
  DeviceChoice choice;
  StatusOr<int> gpus = device == "cpu" ? StatusOr<int>(0) : visible_cuda_devices();
  const bool gpu_visible = gpus.is_ok() && *gpus > 0;
  if (device == "cuda") {
    if (!gpus.is_ok()) {
      return invalid_argument("--device cuda: no usable GPU: {}; train on the CPU with --device "
                              "cpu (or auto, which picks the GPU when there is one)",
                              gpus.status().message());
    }
    if (*gpus == 0) {
      return invalid_argument("--device cuda: the CUDA runtime sees no GPU (is "
                              "CUDA_VISIBLE_DEVICES empty?); use --device cpu or auto");
    }
    if (!kWorkloadsRunOnCuda) {
      return invalid_argument("--device cuda: {}; use --device cpu", kWorkloadsNotOnCuda);
    }
    choice.device = "cuda";
  } else if (device == "auto" && gpu_visible && kWorkloadsRunOnCuda) {
    choice.device = "cuda";
  } else if (device == "auto") {
    choice.device = "cpu";
    choice.notice =
        gpu_visible ? fmt::format("--device auto: {} GPU(s) visible, but {}; training on the CPU",
                                  *gpus, kWorkloadsNotOnCuda)
                    : fmt::format("--device auto: no GPU ({}), training on the CPU",
                                  gpus.is_ok() ? "the CUDA runtime sees none"
                                               : gpus.status().message());
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
  if (config.device == "cpu") {
    CpuDeviceOptions options;
    options.blas_threads = config.blas_threads;
    return std::unique_ptr<Device>(std::make_unique<CpuDevice>(options));
  }
  if (config.device != "cuda") {
    return invalid_argument("the workload's device '{}' was not resolved to cpu or cuda",
                            config.device);
  }
  ASSIGN_OR_RETURN(int gpus, visible_cuda_devices());
  if (gpus < 1) return invalid_argument("--device cuda: the CUDA runtime sees no GPU");
  CudaDeviceOptions options;
  options.ordinal = local_rank % gpus;
  options.precision =
      config.precision == Precision::kBf16 ? GemmPrecision::kBf16 : GemmPrecision::kFp32;
  return create_cuda_device(options);
}

}  // namespace partrain::runner
