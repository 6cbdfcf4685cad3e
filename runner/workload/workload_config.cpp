#include "runner/workload/workload_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/json_fields.h"
#include "memory/workload_json.h"

namespace partrain::runner {

std::optional<Precision> parse_precision(std::string_view name) {
  if (name == "fp32" || name == "fp32-adam") return Precision::kFp32;
  if (name == "bf16" || name == "bf16-mixed") return Precision::kBf16Mixed;
  if (name == "bf16-fp32grad") return Precision::kBf16Fp32Grad;
  return std::nullopt;
}

bool is_bf16(Precision precision) { return precision != Precision::kFp32; }

StateStorage state_storage(Precision precision) {
  return StateStorage{.bf16_params = is_bf16(precision),
                      .bf16_grads = precision == Precision::kBf16Mixed};
}

ElementType activation_type(Precision precision) {
  return is_bf16(precision) ? ElementType::kBf16 : ElementType::kF32;
}

std::string_view precision_name(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kBf16Fp32Grad: return "bf16-fp32grad";
    case Precision::kBf16Mixed: return "bf16-mixed";
  }
  return "fp32";
}

Status check_device_names(std::string_view device, std::string_view comm) {
  if (device != "cpu" && device != "cuda" && device != "auto" && device != "cpu-isolated") {
    return invalid_argument("--device '{}' is not cpu, cuda, auto or cpu-isolated", device);
  }
  if (comm != "gloo" && comm != "nccl" && comm != "auto") {
    return invalid_argument("--comm '{}' is not gloo, nccl or auto", comm);
  }
  return Status::ok();
}

namespace {

// What the mixture of experts does not run on yet: its routing and token exchange go through the
// host, checked on the CPU in fp32 only.
Status check_experts_runnable(const WorkloadConfig& config) {
  if (config.device == "cuda") {
    return invalid_argument("--experts: the mixture of experts runs on the CPU only (--device "
                            "cpu or cpu-isolated); pass --device cpu, or size it on GPUs with "
                            "`partrain memory --experts`");
  }
  if (is_bf16(config.precision)) {
    return invalid_argument("--experts: the mixture of experts trains in fp32 only; pass "
                            "--precision fp32");
  }
  return Status::ok();
}

}  // namespace

Status resolve_workload(WorkloadConfig& config, const memory::LayoutNames& names) {
  WorkloadModel& m = config.model;
  if (config.kind == WorkloadKind::kMlp) {
    // The lecture's MLP: square hidden x hidden layers; tensor parallelism splits the width.
    m.heads = 0;
    m.vocab = 0;
    m.ffn = m.hidden;
  }
  RETURN_IF_ERROR(memory::check_workload_model(config.kind, m));
  if (config.steps < 1) return invalid_argument("--steps must be at least 1, got {}", config.steps);
  RETURN_IF_ERROR(check_device_names(config.device, config.comm));
  if (!(config.lr > 0) || !std::isfinite(config.lr)) {
    return invalid_argument("--lr must be a positive number, got {}", config.lr);
  }
  // MFU divides by it: NaN reached the workers' JSON, 0 printed inf%, -1 a negative MFU.
  if (config.peak_flops && (!(*config.peak_flops > 0) || !std::isfinite(*config.peak_flops))) {
    return invalid_argument(
        "--peak-flops must be a positive number of FLOP/s per rank (e.g. "
        "989e12 for an H100's dense bf16), got {}",
        *config.peak_flops);
  }
  if (config.blas_threads < 1 || config.blas_threads > 1024) {
    return invalid_argument("--blas-threads must be 1 to 1024 (OpenBLAS threads per rank), got {}",
                            config.blas_threads);
  }
  if (config.cpu_bind != "none" && config.cpu_bind != "core") {
    return invalid_argument("--cpu-bind must be none or core, got '{}'", config.cpu_bind);
  }
  if (config.cpu_bind == "core" && config.device == "cuda") {
    return invalid_argument(
        "--cpu-bind core binds the ranks of a CPU workload, and this one "
        "runs on CUDA: leave --cpu-bind out (or pass none)");
  }
  if (config.bucket_bytes < 1) return invalid_argument("--bucket-mb must be positive");
  if (!(config.moe_aux_loss_coeff >= 0) || !std::isfinite(config.moe_aux_loss_coeff)) {
    return invalid_argument("--moe-aux-loss-coeff must be 0 or a positive number, got {}",
                            config.moe_aux_loss_coeff);
  }
  ASSIGN_OR_RETURN(config.resolved,
                   memory::resolve_layout(config.layout,
                                          memory::workload_model_config(config.kind, m), names,
                                          config.world));
  RETURN_IF_ERROR(check_runnable(config.resolved, config.kind, m, names));
  if (m.moe.enabled()) RETURN_IF_ERROR(check_experts_runnable(config));
  for (const fault::FaultSpec& spec : config.faults) {
    Status valid = fault::validate_fault_spec(spec, config.world.ranks, config.steps);
    if (!valid.is_ok()) {
      return invalid_argument("--inject {}: {}", fault::fault_spec_text(spec), valid.message());
    }
  }
  return Status::ok();
}

std::string workload_to_json(const WorkloadConfig& c) {
  nlohmann::json j = {
      {"steps", c.steps},
      {"lr", c.lr},
      {"seed", c.seed},
      {"device", c.device},
      {"comm", c.comm},
      {"precision", precision_name(c.precision)},
      {"bucket_bytes", c.bucket_bytes},
      {"data", c.data_path},
      {"json", c.json},
      {"blas_threads", c.blas_threads},
      {"cpu_bind", c.cpu_bind},
  };
  memory::write_workload_setup(c.kind, c.model, c.resolved, j);
  if (c.model.moe.enabled() && c.moe_aux_loss_coeff > 0) {
    j["moe_aux_loss_coeff"] = c.moe_aux_loss_coeff;  // absent: 0
  }
  if (c.peak_flops) j["peak_flops"] = *c.peak_flops;
  if (!c.faults.empty()) {
    nlohmann::json faults = nlohmann::json::array();
    for (const fault::FaultSpec& spec : c.faults) faults.push_back(fault::fault_spec_text(spec));
    j["faults"] = faults;
  }
  return j.dump();
}

namespace {

// The runner's own fields of the config, each as the launcher writes it.
Status read_run_fields(JsonFields& j, WorkloadConfig& c) {
  RETURN_IF_ERROR(j.integer("steps", c.steps, JsonFields::kAnyInteger));
  RETURN_IF_ERROR(j.positive_number("lr", c.lr));
  RETURN_IF_ERROR(j.integer("seed", c.seed));
  RETURN_IF_ERROR(j.string("device", c.device, true));
  RETURN_IF_ERROR(j.string("comm", c.comm, true));
  RETURN_IF_ERROR(j.choice("precision", c.precision, parse_precision,
                           "fp32, bf16-mixed, bf16-fp32grad", true));
  RETURN_IF_ERROR(j.integer("bucket_bytes", c.bucket_bytes, JsonFields::kAnyInteger));
  RETURN_IF_ERROR(j.string("data", c.data_path, true));
  RETURN_IF_ERROR(j.boolean("json", c.json, true));
  RETURN_IF_ERROR(j.integer("blas_threads", c.blas_threads, JsonFields::kAnyInteger));
  RETURN_IF_ERROR(j.string("cpu_bind", c.cpu_bind));
  c.moe_aux_loss_coeff = 0;
  RETURN_IF_ERROR(j.positive_number("moe_aux_loss_coeff", c.moe_aux_loss_coeff, false));
  if (j.has("peak_flops")) {
    double peak = 0;
    RETURN_IF_ERROR(j.positive_number("peak_flops", peak));
    c.peak_flops = peak;
  }
  std::vector<std::string> faults;
  RETURN_IF_ERROR(j.strings("faults", faults, false));
  for (const std::string& text : faults) {
    auto spec = fault::parse_fault_spec(text);
    if (!spec.is_ok()) return spec.status().with_context("PARTRAIN_WORKLOAD_CONFIG field 'faults'");
    c.faults.push_back(*spec);
  }
  return j.no_unknown_fields();
}

}  // namespace

StatusOr<WorkloadConfig> workload_from_json(std::string_view text) {
  constexpr const char* kOrigin = "PARTRAIN_WORKLOAD_CONFIG";
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return invalid_argument("{} is not a JSON object: `partrain launch --workload` writes it for "
                            "its workers",
                            kOrigin);
  }
  JsonFields fields(j, kOrigin, StatusCode::kInvalidArgument);
  ASSIGN_OR_RETURN(memory::WorkloadSetup setup,
                   memory::read_workload_setup(fields, memory::ConfigReading::kStrict));
  WorkloadConfig c;
  c.kind = setup.kind;
  c.model = setup.model;
  c.layout = setup.layout;
  c.world = setup.world;
  RETURN_IF_ERROR(read_run_fields(fields, c));
  RETURN_IF_ERROR(resolve_workload(c, worker_config_names()).with_context(kOrigin));
  return c;
}

}  // namespace partrain::runner
