// Which device and communicator backend a built-in workload runs on. The launcher resolves the
// user's --device and --comm once, before any rank starts (auto becomes cuda where a GPU is
// visible, with a one-line notice otherwise; impossible combinations are refused with exit 2),
// and every worker then creates its own device from the resolved choice.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "runner/device/device.h"
#include "runner/workload/workload_config.h"

namespace partrain::runner {

struct DeviceChoice {
  std::string device;  // "cpu" or "cuda"
  std::string comm;    // "gloo" or "nccl"
  std::string notice;  // for the launcher to print, e.g. why auto fell back to the CPU
};

// `device`: cpu, cuda or auto; `comm`: gloo, nccl or auto (nccl on cuda, gloo on cpu, as
// torchrun's default backends). `ranks_per_node` is checked against the visible GPUs for NCCL,
// which runs one rank per GPU. kInvalidArgument (exit 2) names the problem and the alternative.
StatusOr<DeviceChoice> choose_device(std::string_view device, std::string_view comm,
                                     int ranks_per_node);

// The rank's device for a resolved config (device cpu or cuda): OpenBLAS on the CPU, or GPU
// local_rank % visible GPUs (ranks share GPUs under Gloo; NCCL was checked to have one each).
StatusOr<std::unique_ptr<Device>> create_workload_device(const WorkloadConfig& config,
                                                         int local_rank);

}  // namespace partrain::runner
