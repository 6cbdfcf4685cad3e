#include "runner/workload/workload_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace partrain::runner {

std::optional<WorkloadKind> parse_workload_kind(std::string_view name) {
  if (name == "gpt") return WorkloadKind::kGpt;
  if (name == "mlp") return WorkloadKind::kMlp;
  return std::nullopt;
}

std::string_view workload_kind_name(WorkloadKind kind) {
  return kind == WorkloadKind::kGpt ? "gpt" : "mlp";
}

std::optional<Recompute> parse_recompute(std::string_view name) {
  if (name == "none") return Recompute::kNone;
  if (name == "selective") return Recompute::kSelective;
  if (name == "full") return Recompute::kFull;
  return std::nullopt;
}

std::string_view recompute_name(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "none";
}

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

Status resolve_workload(WorkloadConfig& config) {
  LayoutModel& m = config.model;
  for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"--layers", m.layers},
                                    {"--hidden", m.hidden},
                                    {"--seq", m.seq},
                                    {"--steps", config.steps}}) {
    if (value < 1) return invalid_argument("{} must be at least 1, got {}", flag, value);
  }
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
  if (config.kind == WorkloadKind::kGpt) {
    if (m.heads < 1 || m.hidden % m.heads != 0) {
      return invalid_argument("--hidden {} is not divisible by --heads {}: each head gets "
                              "hidden / heads dimensions",
                              m.hidden, m.heads);
    }
    if (m.vocab < 2) return invalid_argument("--vocab must be at least 2");
    if (m.ffn < 1) return invalid_argument("--ffn must be at least 1");
  } else {
    // The lecture's MLP: square hidden x hidden layers; tensor parallelism splits the width.
    m.heads = 0;
    m.vocab = 0;
    m.ffn = m.hidden;
    if (config.layout.sp) return invalid_argument("--sp applies to --workload gpt only");
    if (config.layout.tp > 1 && m.hidden % config.layout.tp != 0) {
      return invalid_argument("--hidden {} is not divisible by --tp {}", m.hidden,
                              config.layout.tp);
    }
  }
  ASSIGN_OR_RETURN(config.resolved, resolve_layout(config.layout, config.model));
  if (config.kind == WorkloadKind::kMlp && config.resolved.tp > 1) {
    // Megatron's MLP pairs a column-parallel layer with a row-parallel one: stages hold pairs.
    for (int layers : config.resolved.stage_layers) {
      if (layers % 2 != 0) {
        return invalid_argument("--workload mlp with --tp > 1 pairs layers (column- then "
                                "row-parallel): every pipeline stage needs an even number of "
                                "layers, not {}",
                                layers);
      }
    }
  }
  for (const fault::FaultSpec& spec : config.faults) {
    Status valid = fault::validate_fault_spec(spec, config.resolved.world, config.steps);
    if (!valid.is_ok()) {
      return invalid_argument("--inject {}: {}", fault::fault_spec_text(spec), valid.message());
    }
  }
  return Status::ok();
}

namespace {

nlohmann::json layout_json(const ParallelLayout& l) {
  nlohmann::json j = {{"world", l.world},
                      {"tp", l.tp},
                      {"pp", l.pp},
                      {"sp", l.sp},
                      {"zero", l.zero},
                      {"schedule", pipeline_schedule_name(l.schedule)},
                      {"vpp", l.vpp},
                      {"micro_batch", l.micro_batch},
                      {"pp_split", l.pp_split},
                      {"bucket_bytes", l.bucket_bytes}};
  if (l.dp) j["dp"] = *l.dp;
  if (l.global_batch) j["global_batch"] = *l.global_batch;
  return j;
}

ParallelLayout layout_from(const nlohmann::json& j) {
  ParallelLayout l;
  l.world = j.at("world").get<int>();
  l.tp = j.at("tp").get<int>();
  l.pp = j.at("pp").get<int>();
  l.sp = j.at("sp").get<bool>();
  l.zero = j.at("zero").get<int>();
  l.schedule = parse_pipeline_schedule(j.at("schedule").get<std::string>())
                   .value_or(PipelineSchedule::kOneFOneB);
  l.vpp = j.at("vpp").get<int>();
  l.micro_batch = j.at("micro_batch").get<int>();
  l.pp_split = j.at("pp_split").get<std::vector<int>>();
  l.bucket_bytes = j.at("bucket_bytes").get<int64_t>();
  if (j.contains("dp")) l.dp = j.at("dp").get<int>();
  if (j.contains("global_batch")) l.global_batch = j.at("global_batch").get<int>();
  return l;
}

}  // namespace

std::string workload_to_json(const WorkloadConfig& c) {
  nlohmann::json j = {
      {"workload", workload_kind_name(c.kind)},
      {"model",
       {{"layers", c.model.layers},
        {"hidden", c.model.hidden},
        {"heads", c.model.heads},
        {"seq", c.model.seq},
        {"vocab", c.model.vocab},
        {"ffn", c.model.ffn}}},
      {"layout", layout_json(c.layout)},
      {"steps", c.steps},
      {"lr", c.lr},
      {"seed", c.seed},
      {"device", c.device},
      {"comm", c.comm},
      {"precision", precision_name(c.precision)},
      {"recompute", recompute_name(c.recompute)},
      {"data", c.data_path},
      {"json", c.json},
      {"blas_threads", c.blas_threads},
  };
  if (c.peak_flops) j["peak_flops"] = *c.peak_flops;
  if (!c.faults.empty()) {
    nlohmann::json faults = nlohmann::json::array();
    for (const fault::FaultSpec& spec : c.faults) faults.push_back(fault::fault_spec_text(spec));
    j["faults"] = faults;
  }
  return j.dump();
}

StatusOr<WorkloadConfig> workload_from_json(std::string_view text) {
  WorkloadConfig c;
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    c.kind = parse_workload_kind(j.at("workload").get<std::string>()).value_or(WorkloadKind::kGpt);
    const auto& m = j.at("model");
    c.model = {m.at("layers").get<int>(), m.at("hidden").get<int>(), m.at("heads").get<int>(),
               m.at("seq").get<int>(),    m.at("vocab").get<int>(),  m.at("ffn").get<int>()};
    c.layout = layout_from(j.at("layout"));
    c.steps = j.at("steps").get<int>();
    c.lr = j.at("lr").get<double>();
    c.seed = j.at("seed").get<uint64_t>();
    c.device = j.at("device").get<std::string>();
    c.comm = j.at("comm").get<std::string>();
    c.precision = parse_precision(j.at("precision").get<std::string>()).value_or(Precision::kFp32);
    c.recompute = parse_recompute(j.at("recompute").get<std::string>()).value_or(Recompute::kNone);
    c.data_path = j.at("data").get<std::string>();
    c.json = j.at("json").get<bool>();
    c.blas_threads = j.at("blas_threads").get<int>();
    if (j.contains("peak_flops")) c.peak_flops = j.at("peak_flops").get<double>();
    if (j.contains("faults")) {
      for (const auto& item : j.at("faults")) {
        auto spec = fault::parse_fault_spec(item.get<std::string>());
        if (!spec.is_ok()) return spec.status().with_context("PARTRAIN_WORKLOAD_CONFIG faults");
        c.faults.push_back(*spec);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument("PARTRAIN_WORKLOAD_CONFIG is not a workload description: {}",
                            e.what());
  }
  RETURN_IF_ERROR(resolve_workload(c));
  return c;
}

}  // namespace partrain::runner
