// Reads runs.config leniently: any missing or mistyped field means "not a built-in workload's
// config", so analyses fall back to what the trace alone says.
#include "analyzers/workload_run_config.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "memory/parameter_count.h"

namespace partrain::analyzers {

std::optional<WorkloadRunConfig> parse_workload_run_config(const std::string& json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("workload") || !j.contains("model") ||
      !j.contains("layout")) {
    return std::nullopt;
  }
  // A field that is not a positive whole number (0, negative, 1e300, text) makes the config
  // another shape: a trace edited or written by another tool, never divided by or trusted.
  struct NotAWorkloadConfig {};
  auto whole = [](const nlohmann::json& object, const char* key, int64_t fallback,
                  int64_t least) -> int64_t {
    if (!object.contains(key)) return fallback;
    const nlohmann::json& value = object.at(key);
    if (!value.is_number_integer() || value.get<int64_t>() < least) throw NotAWorkloadConfig{};
    return value.get<int64_t>();
  };
  auto count = [&](const nlohmann::json& object, const char* key, int64_t fallback) {
    const int64_t value = whole(object, key, fallback, 1);
    if (value > std::numeric_limits<int>::max()) throw NotAWorkloadConfig{};
    return static_cast<int>(value);
  };
  try {
    WorkloadRunConfig c;
    c.workload = j.at("workload").get<std::string>();
    const auto& m = j.at("model");
    if (!m.contains("layers") || !m.contains("hidden")) return std::nullopt;
    c.layers = whole(m, "layers", 1, 1);
    c.hidden = whole(m, "hidden", 1, 1);
    c.heads = whole(m, "heads", 1, 1);
    c.seq = whole(m, "seq", 1, 1);
    c.vocab = whole(m, "vocab", 1, 1);
    c.ffn = whole(m, "ffn", 4 * c.hidden, 1);
    const auto& l = j.at("layout");
    if (!l.contains("world")) return std::nullopt;
    c.world = count(l, "world", 1);
    c.tp = count(l, "tp", 1);
    c.pp = count(l, "pp", 1);
    c.vpp = count(l, "vpp", 1);
    c.zero = static_cast<int>(whole(l, "zero", 0, 0));
    if (c.zero > 3) return std::nullopt;
    c.sp = l.value("sp", false);
    c.schedule = memory::parse_schedule(l.value("schedule", std::string("1f1b")))
                     .value_or(memory::PipelineSchedule::kOneFOneB);
    c.micro_batch = count(l, "micro_batch", 1);
    c.dp =
        l.contains("dp") ? count(l, "dp", 1) : static_cast<int>(c.world / (int64_t{c.tp} * c.pp));
    if (c.dp < 1) return std::nullopt;
    c.global_batch = count(l, "global_batch", int64_t{c.dp} * c.micro_batch);
    for (int layers : l.value("pp_split", std::vector<int>{})) c.pp_split.push_back(layers);
    c.precision = j.value("precision", std::string("fp32"));
    c.recompute = j.value("recompute", std::string("none"));
    c.micro_batches =
        static_cast<int>(std::max<int64_t>(1, c.global_batch / (int64_t{c.dp} * c.micro_batch)));
    return c;
  } catch (const NotAWorkloadConfig&) {
    return std::nullopt;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // a config of another shape: not a built-in workload's
  }
}

StatusOr<memory::EstimateInput> workload_estimate_input(const WorkloadRunConfig& c) {
  memory::EstimateInput in;
  if (c.workload == "mlp") {
    in.model.name = "builtin-mlp";
    in.model.architecture = memory::Architecture::kMlp;
    in.model.layers = c.layers;
    in.model.hidden = c.hidden;
  } else {
    in.model = memory::gpt_model(c.layers, c.hidden, c.heads, c.vocab, c.seq);
    in.model.name = "builtin-gpt";
    in.model.ffn = c.ffn;
  }
  in.layout.dp = c.dp;
  in.layout.tp = c.tp;
  in.layout.pp = c.pp;
  in.layout.vpp = c.vpp;
  in.layout.sp = c.sp;
  in.layout.zero = c.zero;
  in.layout.schedule = c.schedule;
  in.layout.pp_split = c.pp_split;
  in.layout.micro_batch = c.micro_batch;
  in.layout.global_batch = c.global_batch;
  in.layout.recompute = memory::parse_recompute(c.recompute).value_or(memory::Recompute::kNone);
  ASSIGN_OR_RETURN(in.recipe, memory::precision_recipe(c.precision, memory::Optimizer::kAdamW));
  in.reserve_bytes = 0;
  // How partrain's workload holds gradients for communication: its DDP buckets and ZeRO-1's
  // all-reduce are views of the flat gradients (no copy); ZeRO-2 and -3 stage each unit's
  // gradients in fp32 for the reduce-scatter under every recipe, ZeRO-2 two units at a time
  // (one reducing while the next is produced), ZeRO-3 one beside the unit in backward. Measured
  // exactly on 2-layer gpts (hidden 64, vocabularies 128 to 8192, fp32 and bf16).
  constexpr double kStagedGradBytes = 4;
  in.reduce_grad_bytes = kStagedGradBytes;
  in.bucket_bytes = 0;
  in.zero2_stages_units = true;
  return in;
}

StatusOr<std::optional<WorkloadRunConfig>> read_workload_run_config(const profiler::SqliteDb& db) {
  ASSIGN_OR_RETURN(auto stmt, profiler::SqliteStatement::prepare(
                                  db, "SELECT config FROM runs WHERE config IS NOT NULL LIMIT 1"));
  if (stmt.step() != SQLITE_ROW) return std::optional<WorkloadRunConfig>();
  return parse_workload_run_config(stmt.column_text(0));
}

}  // namespace partrain::analyzers
