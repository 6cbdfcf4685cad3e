// Everything a rank needs to run a built-in workload: the model, the parallel layout, the
// training hyper-parameters and the data. `partrain launch --workload` builds and checks it
// once, then hands it to every worker as JSON (PARTRAIN_WORKLOAD_CONFIG), which a worker reads
// strictly: a field that is not the launcher's is an error naming it, never a default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "runner/device/tensor.h"
#include "runner/fault/fault_spec.h"
#include "runner/workload/param_access.h"
#include "runner/workload/workload_layout.h"

namespace partrain::runner {

// The `partrain memory` recipes a run can store its model states as. Both bf16 ones multiply bf16
// GEMM operands (GemmPrecision::kBf16) and store bf16 parameters beside an fp32 master
// (ParamStorage::kBf16); kBf16Mixed stores the gradients in bf16 as well (GradStorage::kBf16).
enum class Precision {
  kFp32,          // fp32-adam: 4 + 4 + 8 bytes a parameter
  kBf16Fp32Grad,  // bf16-fp32grad: 2 + 4 + 12
  kBf16Mixed,     // bf16-mixed: 2 + 2 + 12
};
bool is_bf16(Precision precision);
StateStorage state_storage(Precision precision);
// The type the model chunks keep their activations in: bf16 under both bf16 recipes.
ElementType activation_type(Precision precision);

// fp32 (fp32-adam), bf16 (bf16-mixed) and bf16-fp32grad; nullopt for anything else, including
// bf16-fp32grad-accum (an fp32 accumulation buffer beside bf16 gradients: not implemented).
std::optional<Precision> parse_precision(std::string_view name);
std::string_view precision_name(Precision precision);

struct WorkloadConfig {
  WorkloadKind kind = WorkloadKind::kGpt;
  WorkloadModel model;
  TrainingLayout layout;     // as given
  memory::LayoutWorld world;  // the ranks the layout fills (dp, unless given, is what it leaves)
  ResolvedLayout resolved;   // filled by resolve_workload
  int64_t bucket_bytes = 25'000'000;  // DDP gradient bucket (PyTorch's default 25 MB)
  int steps = 10;
  double lr = 1e-3;
  // A mixture of experts' load-balancing loss weight (Switch, Fedus 2021: 0.01); 0: none.
  double moe_aux_loss_coeff = 0.01;
  uint64_t seed = 1234;
  std::string device = "cpu";  // cpu, cuda, auto, cpu-isolated (auto resolved: workload_device.h)
  std::string comm = "gloo";   // gloo, nccl, auto (likewise)
  Precision precision = Precision::kFp32;
  std::string data_path;  // empty: the synthetic stream
  std::optional<double> peak_flops;  // per rank, FLOP/s; unset: measured sgemm peak on CPU
  bool json = false;
  int blas_threads = 1;
  // none, or core: each rank bound to blas_threads CPUs of its own (runner/worker/cpu_binding.h).
  std::string cpu_bind = "none";
  std::vector<fault::FaultSpec> faults;  // --inject, checked against world and steps
};

// --device is cpu, cuda, auto or cpu-isolated and --comm gloo, nccl or auto; kInvalidArgument names the bad one.
Status check_device_names(std::string_view device, std::string_view comm);

// Checks the model and the training values, resolves the layout on the world
// (memory::resolve_layout) and checks that the workloads can run it (check_runnable);
// kInvalidArgument names the constraint in `names`.
Status resolve_workload(WorkloadConfig& config,
                        const memory::LayoutNames& names = launch_flag_names());

// The resolved config as JSON (resolve_workload first).
std::string workload_to_json(const WorkloadConfig& config);
// The config as the launcher wrote it, resolved; anything else (malformed JSON, a field missing,
// unknown or of the wrong type or value) is kInvalidArgument naming PARTRAIN_WORKLOAD_CONFIG and
// the field.
StatusOr<WorkloadConfig> workload_from_json(std::string_view json);

}  // namespace partrain::runner
