#include "memory/memory_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/json_dump.h"
#include "core/number_format.h"
#include "memory/pipeline.h"

namespace partrain::memory {
namespace {

// What the figures leave out or rest on that the table cannot show: the text's notes and
// --json's warnings.
std::vector<std::string> estimate_notes(const EstimateInput& in, const ReportContext& context) {
  std::vector<std::string> notes;
  if (in.model.is_bare()) {
    notes.push_back(
        "activations are not estimated from --params alone (no layers, hidden size or sequence): "
        "the total and the fit are the model states only; give --model or --layers, --hidden, "
        "--heads and --seq instead");
  }
  if (!context.capacity_caveat.empty()) notes.push_back(context.capacity_caveat);
  return notes;
}

using nlohmann::ordered_json;

constexpr double kGiB = 1073741824.0;

int64_t to_bytes(double bytes) { return static_cast<int64_t>(std::llround(bytes)); }

ordered_json bytes_json(const StageMemory& stage) {
  const StageBytes b = whole_bytes(stage);
  return ordered_json{{"params", b.params},       {"grads", b.grads},
                      {"optimizer", b.optimizer}, {"activations", b.activations},
                      {"comm", b.comm},           {"kv_cache", b.kv_cache},
                      {"reserve", b.reserve},     {"total", b.total()}};
}

// GiB and GB columns; MiB and MB when the model's own memory (all but the reserve, which is a GiB
// for any model) is under a GiB, as nvidia-smi counts in MiB.
struct Units {
  const char* binary_name;
  double binary;
  const char* decimal_name;
  double decimal;
};

// Units for figures up to `largest` bytes of a stage's own memory (StageMemory::total() less the
// reserve, which is a GiB for any model).
Units units_for(double largest) {
  return largest < kGiB ? Units{"MiB", 1048576.0, "MB", 1e6} : Units{"GiB", kGiB, "GB", 1e9};
}

double own_memory(const StageMemory& s) { return s.total() - s.reserve; }

// A table's figure with two decimals; one that is not zero but would round to 0.00 reads "<0.01"
// (the JSON carries its bytes), so a small model's parameters never read as none.
std::string amount(double value) {
  if (value > 0 && value < 0.005) return "<0.01";
  return fmt::format("{:.2f}", value);
}

std::string row(const Units& u, std::string_view label, double bytes) {
  return fmt::format("  {:<13}{:>10}{:>11}\n", label, amount(bytes / u.binary),
                     amount(bytes / u.decimal));
}

std::string layout_line(const EstimateInput& in, const MemoryEstimate& e) {
  const auto& l = in.layout;
  std::string line = fmt::format("layout    dp {}  tp {}{}  pp {}", l.dp, l.tp, l.sp ? " (sp)" : "", l.pp);
  if (l.vpp > 1) line += fmt::format("  vpp {}", l.vpp);
  if (l.cp > 1) line += fmt::format("  cp {}", l.cp);
  if (l.ep > 1) line += fmt::format("  ep {}", l.ep);
  if (in.inference) {
    // Serving: a batch of sequences, each of kv_len + gen_len tokens (the recipe line); no
    // optimizer, schedule or recompute, and the training seq plays no part.
    return line +
           fmt::format("  batch {}{}\n", l.micro_batch, l.flash_attention ? "  flash-attn" : "");
  }
  line += fmt::format("  zero {}", l.zero);
  if (zero_replicas(l) > 1) {
    line += fmt::format(" (sharded over {}, {} replicas)", zero_shard_ranks(l), zero_replicas(l));
  }
  line +=
      fmt::format("  micro-batch {}  global batch {} ({} micro-batch{})  seq {}  {}", l.micro_batch,
                  e.layout.global_batch, e.layout.micro_batches,
                  e.layout.micro_batches == 1 ? "" : "es", e.layout.seq, schedule_name(l.schedule));
  line += fmt::format("  recompute {}{}\n", recompute_name(l.recompute),
                      l.flash_attention ? "  flash-attn" : "");
  return line;
}

// The schedule's bubble, the heaviest stage's micro-batches in flight and the parameter copies a
// rank holds (DualPipe: 2), for a pipelined training estimate; empty otherwise.
std::string pipeline_line(const EstimateInput& in, const MemoryEstimate& e) {
  const auto& l = in.layout;
  if (in.inference || l.pp <= 1) return "";
  return fmt::format(
      "pipeline  {}: bubble {} of the ideal time, {:.4g} micro-batch{} in flight "
      "on stage {}, {} parameter cop{} per rank\n",
      schedule_name(l.schedule),
      format_percent(bubble_fraction(l.schedule, l.pp, e.layout.micro_batches, l.vpp)),
      e.heaviest_stage().in_flight, e.heaviest_stage().in_flight == 1 ? "" : "es", e.heaviest,
      parameter_copies(l.schedule), parameter_copies(l.schedule) == 1 ? "y" : "ies");
}

std::string recipe_line(const EstimateInput& in) {
  const auto& r = in.recipe;
  if (in.inference) {
    return fmt::format("recipe    inference: {} B/param weights, KV cache of {} + {} tokens\n",
                       r.param_bytes, in.kv_len, in.gen_len);
  }
  return fmt::format("recipe    {}: {} + {} + {} = {} bytes/param ({}), activations {} B/element, "
                     "dropout {}\n",
                     r.name, r.param_bytes, r.grad_bytes, r.optimizer_bytes, r.total(),
                     optimizer_name(in.optimizer), r.activation_bytes, in.layout.dropout);
}

std::string stage_table(const MemoryEstimate& e) {
  double largest = 0;
  for (const StageMemory& s : e.stages) largest = std::max(largest, own_memory(s));
  const Units u = units_for(largest);
  std::string out = fmt::format(
      "\nper stage ({})\n  {:>5} {:>6} {:>9} {:>8} {:>8} {:>9} {:>11} "
      "{:>8} {:>8} {:>8} {:>8}\n",
      u.binary_name, "stage", "layers", "params#", "params", "grads", "optimizer", "activations",
      "comm", "kv", "reserve", "total");
  for (const StageMemory& s : e.stages) {
    out += fmt::format(
        "  {:>5} {:>6} {:>9.3g} {:>8} {:>8} {:>9} {:>11} {:>8} {:>8} {:>8} {:>8}{}\n", s.stage,
        s.layers, s.params_count, amount(s.params / u.binary), amount(s.grads / u.binary),
        amount(s.optimizer / u.binary), amount(s.activations / u.binary), amount(s.comm / u.binary),
        amount(s.kv_cache / u.binary), amount(s.reserve / u.binary), amount(s.total() / u.binary),
        static_cast<size_t>(s.stage) == e.heaviest ? "  <- heaviest" : "");
  }
  return out;
}

std::string pipeline_bubble_warning(const EstimateInput& in, const MemoryEstimate& e) {
  const std::optional<std::string> advice = pipeline_bubble_advice(in, e);
  return advice ? "warning   " + *advice + "\n" : std::string();
}

}  // namespace

std::optional<std::string> pipeline_bubble_advice(const EstimateInput& in,
                                                  const MemoryEstimate& e) {
  const auto& l = in.layout;
  const int64_t m = e.layout.micro_batches;
  if (in.inference || l.pp <= 1 || m >= l.pp) return std::nullopt;
  // Megatron-LM's rule of thumb, m >= 4 p: the bubble (p-1)/(v m) under 25% of the ideal time.
  const int64_t suggested_m = 4 * static_cast<int64_t>(l.pp);
  const int64_t per_micro_batch = e.layout.global_batch / m;  // dp x micro-batch sequences
  return fmt::format(
      "{} micro-batch{} per step on {} pipeline stages: the bubble (p - 1)/(v m) is {:.0f}% of "
      "the ideal time; --global-batch {} gives m = {} and {:.0f}%",
      m, m == 1 ? "" : "es", l.pp, 100 * bubble_fraction(l.schedule, l.pp, m, l.vpp),
      suggested_m * per_micro_batch, suggested_m,
      100 * bubble_fraction(l.schedule, l.pp, suggested_m, l.vpp));
}

std::string format_estimate_text(const EstimateInput& in, const MemoryEstimate& e,
                                 const ReportContext& context, bool per_stage) {
  const StageMemory& s = e.heaviest_stage();
  std::string out = fmt::format(
      "model     {} ({:.4g} parameters{})\n", context.model_name, e.total_params,
      e.active_params < e.total_params ? fmt::format(", {:.4g} active per token", e.active_params)
                                       : "");
  for (const std::string& note : in.model.notes) out += "note      " + note + "\n";
  out += layout_line(in, e);
  out += pipeline_line(in, e);
  out += recipe_line(in);
  out += pipeline_bubble_warning(in, e);
  // Stages are numbered from 0, as --json, --per-stage and analyze number them (pp ranks).
  out += e.stages.size() > 1
             ? fmt::format(
                   "\nper GPU, stage {} of stages 0-{} (heaviest; {} layers, {:.4g} "
                   "parameters)\n",
                   s.stage, e.stages.size() - 1, s.layers, s.params_count)
             : fmt::format("\nper GPU ({} layers, {:.4g} parameters)\n", s.layers, s.params_count);
  const Units u = units_for(own_memory(s));
  out += fmt::format("  {:<13}{:>10}{:>11}\n", "category", u.binary_name, u.decimal_name);
  out += row(u, "params", s.params);
  out += row(u, "grads", s.grads);
  out += row(u, "optimizer", s.optimizer);
  out += row(u, "activations", s.activations);
  out += row(u, "comm", s.comm);
  if (in.inference || s.kv_cache > 0) out += row(u, "kv cache", s.kv_cache);  // none in training
  out += row(u, in.reserve_bytes ? "reserve" : "reserve*", s.reserve);
  out += row(u, "total", s.total());
  if (e.capacity_bytes > 0) {
    out += row(u, "capacity", e.capacity_bytes);
    const double headroom = e.headroom();
    out += fmt::format("  {:<13}{}: {:.2f} GiB ({:.2f} GB) {} on {}\n", "fits",
                       e.fits() ? "yes" : "NO", std::fabs(headroom) / kGiB, std::fabs(headroom) / 1e9,
                       e.fits() ? "headroom" : "over", context.gpu_name);
  }
  for (const std::string& note : estimate_notes(in, context)) out += "  note: " + note + "\n";
  if (!in.reserve_bytes) {
    out += "  * default reserve: CUDA context 512 MiB + NCCL 512 MiB + 5% fragmentation (--reserve)\n";
  }
  out += "  GiB = 2^30 bytes, GB = 10^9 bytes; MiB = 2^20, MB = 10^6\n";
  if (per_stage) out += stage_table(e);
  return out;
}

std::string format_estimate_json(const EstimateInput& in, const MemoryEstimate& e,
                                 const ReportContext& context) {
  ordered_json stages = ordered_json::array();
  for (const StageMemory& s : e.stages) {
    stages.push_back({{"stage", s.stage},
                      {"layers", s.layers},
                      {"params_count", to_bytes(s.params_count)},
                      {"expert_params_count", to_bytes(s.expert_params_count)},
                      {"in_flight_micro_batches", s.in_flight},
                      {"per_gpu_bytes", bytes_json(s)}});
  }
  const auto& l = in.layout;
  ordered_json out = {
      {"model", context.model_name},
      {"params", to_bytes(e.total_params)},
      {"active_params", to_bytes(e.active_params)},
      {"model_notes", in.model.notes},
      {"gpu", context.gpu_name},
      {"layout",
       {{"dp", l.dp},
        {"tp", l.tp},
        {"pp", l.pp},
        {"vpp", l.vpp},
        {"cp", l.cp},
        {"ep", l.ep},
        {"sp", l.sp},
        {"zero", l.zero},
        {"shard", l.zero > 0 ? zero_shard_ranks(l) : 1},
        {"micro_batch", l.micro_batch},
        {"global_batch", e.layout.global_batch},
        {"micro_batches", e.layout.micro_batches},
        {"seq", e.layout.seq},
        {"pp_schedule", schedule_name(l.schedule)},
        {"bubble_fraction",
         l.pp > 1 ? bubble_fraction(l.schedule, l.pp, e.layout.micro_batches, l.vpp) : 0.0},
        {"parameter_copies", parameter_copies(l.schedule)},
        {"recompute", recompute_name(l.recompute)},
        // Serving keeps the weights alone (the recipe line's B/param), not training's states.
        {"precision", in.inference ? std::string("inference") : in.recipe.name},
        {"bytes_per_param", in.inference ? in.recipe.param_bytes : in.recipe.total()},
        {"inference", in.inference}}},
      {"per_gpu_bytes", bytes_json(e.heaviest_stage())},
      {"capacity_bytes", to_bytes(e.capacity_bytes)},
      {"fits", e.fits()},
      {"headroom_bytes", to_bytes(e.capacity_bytes) - whole_bytes(e.heaviest_stage()).total()},
      {"stage", e.heaviest},
      {"stages", stages}};
  if (in.inference) {
    out["layout"]["kv_len"] = in.kv_len;
    out["layout"]["gen_len"] = in.gen_len;
  }
  const std::optional<std::string> bubble = pipeline_bubble_advice(in, e);
  out["warnings"] = bubble ? ordered_json::array({*bubble}) : ordered_json::array();
  for (const std::string& note : estimate_notes(in, context)) out["warnings"].push_back(note);
  return dump_json(out, 2) + "\n";
}

std::string format_explain_text(const std::vector<ExplainLine>& lines) {
  std::string out = "\nhow (heaviest stage)\n";
  for (const ExplainLine& line : lines) {
    out += fmt::format("  {}\n      {}\n      = {}\n      source: {}\n", line.quantity, line.formula,
                       line.result, line.source);
  }
  return out;
}

namespace {

// The dp sizes left out and why; nullopt when none was.
std::optional<std::string> dp_left_out_note(const SweepReport& r) {
  if (r.dp_left_out.empty() || !r.global_batch) return std::nullopt;
  return fmt::format(
      "dp {} left out: the global batch of {} is not a multiple of dp x "
      "micro-batch (every data-parallel rank runs whole micro-batches)",
      fmt::join(r.dp_left_out, ", "), *r.global_batch);
}

}  // namespace

std::string format_sweep_text(const SweepReport& r, const ReportContext& context) {
  std::string out = fmt::format("model     {} ({:.4g} parameters), seq {}\n", context.model_name,
                                r.params, r.seq);
  out += fmt::format("FLOPs     {:.4g} per token ({:.4g} with full recompute); {:.4g} per "
                     "iteration ({:.4g} with full recompute)\n",
                     r.flops_per_token, r.flops_per_token_recompute, r.flops_per_iteration,
                     r.flops_per_iteration_recompute);
  double largest = 0;
  for (const SweepRow& row : r.rows) {
    largest = std::max(largest, own_memory(row.heaviest));
  }
  const Units u = units_for(largest);
  out +=
      fmt::format("per GPU, heaviest stage, {}{}\n", u.binary_name,
                  context.gpu_name.empty() ? "" : fmt::format(" (fits: on {})", context.gpu_name));
  out += fmt::format("  {:>5} {:>4} {:>9} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9} {:>9}  {}\n", "dp",
                     "zero", "recompute", "params", "grads", "optimizer", "activations", "comm",
                     r.default_reserve ? "reserve*" : "reserve", "total", "fits");
  for (const SweepRow& row : r.rows) {
    const StageMemory& s = row.heaviest;
    out += fmt::format(
        "  {:>5} {:>4} {:>9} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9} {:>9}  {}\n", row.dp, row.zero,
        recompute_name(row.recompute), amount(s.params / u.binary), amount(s.grads / u.binary),
        amount(s.optimizer / u.binary), amount(s.activations / u.binary), amount(s.comm / u.binary),
        amount(s.reserve / u.binary), amount(s.total() / u.binary), row.fits ? "yes" : "no");
  }
  if (r.default_reserve) {
    out +=
        "  * default reserve: CUDA context 512 MiB + NCCL 512 MiB + 5% fragmentation (--reserve)\n";
  }
  if (r.global_batch) {
    out += fmt::format(
        "  each row keeps the global batch of {} (micro-batches per step: {} / (dp "
        "x micro-batch))\n",
        *r.global_batch, *r.global_batch);
  } else if (r.pp > 1) {
    out += fmt::format(
        "  each row keeps {} micro-batch{} per step (global batch = dp x micro-batch x {})\n",
        r.micro_batches, r.micro_batches == 1 ? "" : "es", r.micro_batches);
  }
  if (r.pipeline_advice) out += "warning   " + *r.pipeline_advice + "\n";
  if (std::optional<std::string> left_out = dp_left_out_note(r)) {
    out += "note      " + *left_out + "\n";
  }
  return out;
}

std::string format_sweep_json(const SweepReport& r, const ReportContext& context) {
  ordered_json rows = ordered_json::array();
  for (const SweepRow& row : r.rows) {
    rows.push_back({{"dp", row.dp}, {"zero", row.zero},
                    {"recompute", recompute_name(row.recompute)},
                    {"per_gpu_bytes", bytes_json(row.heaviest)}, {"fits", row.fits}});
  }
  ordered_json out = {{"model", context.model_name},
                      {"params", to_bytes(r.params)},
                      {"seq", r.seq},
                      {"flops_per_token", r.flops_per_token},
                      {"flops_per_token_full_recompute", r.flops_per_token_recompute},
                      {"flops_per_iteration", r.flops_per_iteration},
                      {"flops_per_iteration_full_recompute", r.flops_per_iteration_recompute},
                      {"gpu", context.gpu_name},
                      {"micro_batches", r.micro_batches},
                      {"rows", rows}};
  out["global_batch"] = r.global_batch ? ordered_json(*r.global_batch) : ordered_json(nullptr);
  out["dp_left_out"] = r.dp_left_out;
  out["warnings"] =
      r.pipeline_advice ? ordered_json::array({*r.pipeline_advice}) : ordered_json::array();
  if (std::optional<std::string> left_out = dp_left_out_note(r)) {
    out["warnings"].push_back(*left_out);
  }
  return dump_json(out, 2) + "\n";
}

}  // namespace partrain::memory
