#include "analyzers/recommend_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "analyzers/compute_cost.h"
#include "analyzers/expert_report.h"
#include "analyzers/report_numbers.h"
#include "core/byte_size.h"
#include "core/json_dump.h"
#include "core/number_format.h"

namespace partrain::analyzers {
namespace {

using nlohmann::json;

std::string header(const RecommendContext& c) {
  // "8 per node" for 2 GPUs read as 8 present: the GPUs fill whole nodes, or one node in part.
  const std::string nodes = c.gpus <= c.gpus_per_node
                                ? fmt::format("on one node of {}", c.gpus_per_node)
                                : fmt::format("{} per node, {} nodes", c.gpus_per_node,
                                              (c.gpus + c.gpus_per_node - 1) / c.gpus_per_node);
  return fmt::format("partrain recommend: {} on {} x {} ({}), global batch {} x {} tokens\n",
                     c.model, c.gpus, c.gpu, nodes, c.global_batch, c.seq) +
         (c.model_notes.empty() ? "" : fmt::format("note: {}\n", fmt::join(c.model_notes, "; ")));
}

// Why layouts left the search, in words, with counts that add up: the layouts (ranked plus each
// reason) to the layouts searched, the splits refused whole to the splits they are of.
std::string search_summary(const SearchResult& r, std::string_view split_separator = "\n",
                           std::string_view took = "") {
  std::string layouts = fmt::format("{} ranked", r.ranked.size());
  std::string splits;
  int64_t refused_splits = 0;
  for (const auto& [reason, count] : r.rejected) {
    if (is_split_reason(reason)) {
      refused_splits += count;
      splits += fmt::format("{}{} {}", splits.empty() ? "" : ", ", count, rejection_words(reason));
    } else {
      layouts += fmt::format(", {} {}", count, rejection_words(reason));
    }
  }
  if (r.layouts() == 0 && r.splits == 0) return "the search's restrictions leave no layout";
  std::string text = fmt::format("{} layouts searched{}: {}", r.layouts(), took, layouts);
  if (refused_splits > 0) {
    text += fmt::format("{}{} of {} dp x tp x pp x cp splits left out whole: {}", split_separator,
                        refused_splits, r.splits, splits);
  }
  return text;
}

// Said under the table when a shown layout's step was held at the devices' peak.
constexpr std::string_view kHeldAtPeakNote =
    "MFU 100%: the calibration asked for a step faster than every GPU at its peak (a trace too "
    "short, or with damaged step or compute times: see its analyze data loss), so the step is "
    "held at the peak's time; re-calibrate from a longer, intact trace";

std::string table_row(size_t index, const Candidate& c, size_t width, bool tie, bool moe) {
  const StepCost& k = c.cost;
  // Shares of the step by format_percent: a bubble or exposed share that is not zero never reads
  // "0.0%". A mixture of experts' all_to_all share (inside exp.comm) has a column of its own.
  const std::string all_to_all =
      moe ? fmt::format(" {:>7}", format_percent(pct(k.ep_comm_s, k.step_s) / 100)) : "";
  return fmt::format("{:>3}{} {:<{}} {:>11} {:>10} {:>13} {:>7} {:>7} {:>8}{}  {}\n", index,
                     tie ? "=" : " ", layout_label(c.layout), width, gib(c.heaviest.total()),
                     seconds_text(k.step_s), tokens_text(k.tokens_per_s), format_percent(k.mfu),
                     format_percent(pct(k.bubble_s, k.step_s) / 100),
                     format_percent(pct(k.exposed_comm_s(), k.step_s) / 100), all_to_all,
                     k.bottleneck);
}

// One dense block's passes, as a profiler shows them per layer ("" for a mixture of experts
// without dense blocks): a line of its own.
std::string block_text(const StepCost& c, int64_t micro_batch) {
  if (!c.block.exists) return "";
  const SecondsUnit unit = seconds_unit(c.block.backward_s);
  return fmt::format(
      "  one {}block, one micro-batch of {}: forward {}, backward {} (its recompute and the "
      "exposed tensor-parallel collectives included)\n",
      c.experts.moe ? "dense " : "", micro_batch, seconds_in(c.block.forward_s, unit),
      seconds_in(c.block.backward_s, unit));
}

std::string compute_parts_text(const StepCost& c) {
  const ComputeParts& p = c.compute_parts;
  const SecondsUnit unit = seconds_unit(c.compute_s);
  std::string text = fmt::format(
      "compute {} = GEMMs {} + memory-bound {} + attention core {} + LM head {}",
      seconds_in(c.compute_s, unit), seconds_in(p.gemm_s, unit), seconds_in(p.memory_bound_s, unit),
      seconds_in(p.attention_core_s, unit), seconds_in(p.head_s, unit));
  if (p.grad_accumulation_s > 0) {
    text += fmt::format(" + gradient accumulation {}", seconds_in(p.grad_accumulation_s, unit));
  }
  if (c.experts.moe) {
    text += fmt::format(" + router {} + routed experts {} + shared experts {}",
                        seconds_in(p.router_s, unit), seconds_in(p.routed_experts_s, unit),
                        seconds_in(p.shared_experts_s, unit));
  }
  return text;
}

std::string speeds_text(const FittedSpeeds& f) {
  std::string text = fmt::format(
      "cost model ({}): peak {:.4g} TFLOP/s; GEMMs at {:.2f} of peak over whole waves of 128x128 "
      "tiles on {} SMs + {} each; memory-bound kernels at {:.2f} x {:.4g} GB/s{}; {}; busbw "
      "{:.4g} GB/s in a node, {:.4g} GB/s between nodes; {}\n",
      f.gpu, f.peak_flops / 1e12, f.gemm_efficiency,
      f.sm_count > 0 ? std::to_string(f.sm_count) : "(unmodelled)", seconds_text(f.gemm_overhead_s),
      f.memory_efficiency, f.memory_bandwidth / 1e9,
      f.special_function_rate > 0
          ? fmt::format(", the MLP activation at {:.4g} M special-function evaluations/s where "
                        "that outlasts its bytes",
                        f.special_function_rate / 1e6)
          : "",
      f.flash_attention
          ? fmt::format("FlashAttention at {:.2f} of peak", f.flash_attention_efficiency)
          : std::string("attention core materialised (its scores' bytes at the memory-bound "
                        "rate; --flash-attn costs FlashAttention)"),
      f.intra_node_busbw / 1e9, f.inter_node_busbw / 1e9,
      f.collective_sms > 0 && f.sm_count > f.collective_sms
          ? fmt::format("an overlapped collective holds {} SMs, compute beside it runs on {}",
                        f.collective_sms, f.sm_count - f.collective_sms)
          : std::string("overlapped collectives cost compute nothing"));
  if (!f.fit_source.empty()) text += "  fitted to: " + f.fit_source + "\n";
  return text;
}

std::string software_text(const SoftwareSettings& s) {
  const bool megatron = s.precision == "bf16-fp32grad" && !s.overlap_grad_reduce &&
                        !s.overlap_param_gather && s.tp_backward_overlap &&
                        s.grad_accumulation == "fused" && s.pipeline_p2p == "scatter-gather" &&
                        s.zero3_recompute == "regather";
  return fmt::format(
      "software{}: precision {} (gradients kept and reduced at {} B a parameter); gradients "
      "reduced {}; ZeRO-1/2's weights gathered {}; tensor-parallel backward collectives {}; "
      "gradient accumulation {}; pipeline p2p {}; ZeRO-3 under full recompute {}; dropout {} "
      "({})\n",
      megatron ? " (Megatron-LM's defaults)" : "", s.precision, s.grad_bytes,
      s.overlap_grad_reduce ? "behind the backward, bucket by bucket" : "after the backward",
      s.overlap_param_gather ? "behind the forward" : "after the optimizer step",
      s.tp_backward_overlap ? "behind the GEMMs" : "in line", s.grad_accumulation, s.pipeline_p2p,
      s.zero3_recompute == "reuse" ? "gathers once for the backward and its recompute"
                                   : "gathers again for the recompute",
      s.dropout, s.dropout_source.empty() ? "given" : s.dropout_source);
}

json software_json(const SoftwareSettings& s) {
  return {{"precision", s.precision},
          {"grad_bytes_per_param", s.grad_bytes},
          {"overlap_grad_reduce", s.overlap_grad_reduce},
          {"overlap_param_gather", s.overlap_param_gather},
          {"tp_backward_overlap", s.tp_backward_overlap},
          {"grad_accumulation", s.grad_accumulation},
          {"pipeline_p2p", s.pipeline_p2p},
          {"zero3_recompute", s.zero3_recompute},
          {"dropout", s.dropout}};
}

json speeds_json(const FittedSpeeds& f) {
  return {{"gpu", f.gpu},
          {"peak_flops", f.peak_flops},
          {"gemm_efficiency", f.gemm_efficiency},
          {"gemm_overhead_s", f.gemm_overhead_s},
          {"sm_count", f.sm_count},
          {"collective_sms", f.collective_sms},
          {"memory_bandwidth", f.memory_bandwidth},
          {"memory_efficiency", f.memory_efficiency},
          {"flash_attention_efficiency", f.flash_attention_efficiency},
          {"special_function_rate", f.special_function_rate},
          {"attention", f.flash_attention ? "flash" : "materialised"},
          {"intra_node_busbw", f.intra_node_busbw},
          {"inter_node_busbw", f.inter_node_busbw},
          {"fit_source", f.fit_source},
          {"tie_fraction", kTieFraction}};
}

// Narayanan 2021 eq. 4: days ~ 8 T P / (n X) with full recompute (6 without), X the hardware
// FLOP/s each GPU achieves; the same as T over the predicted tokens/s.
std::string training_time_text(const RecommendContext& context, const Candidate& c) {
  if (context.tokens <= 0) return "";
  const double days = context.tokens / c.cost.tokens_per_s / 86400;
  const double t = context.tokens;
  const std::string tokens = t >= 1e12  ? three_digits(t / 1e12) + "T"
                             : t >= 1e9 ? three_digits(t / 1e9) + "B"
                             : t >= 1e6 ? three_digits(t / 1e6) + "M"
                                        : three_digits(t);
  return fmt::format(
      "training {} tokens with {}: {} days ({} h) at its predicted {} (Narayanan 2021 eq. "
      "4: k T P / (n X), k = {} {})\n",
      tokens, layout_label(c.layout), three_digits(days), three_digits(days * 24),
      tokens_text(c.cost.tokens_per_s), c.layout.recompute == memory::Recompute::kFull ? 8 : 6,
      c.layout.recompute == memory::Recompute::kFull ? "with full recompute"
                                                     : "without full recompute");
}

std::string table_header(size_t width, bool moe) {
  return fmt::format("{:>3}  {:<{}} {:>11} {:>10} {:>13} {:>7} {:>7} {:>8}{}  {}\n", "#", "layout",
                     width, "memory/GPU", "step time", "throughput", "MFU", "bubble", "exp.comm",
                     moe ? fmt::format(" {:>7}", "a2a") : "", "bottleneck");
}

// The categories of a GPU's memory that make up its total in training.
std::string memory_parts_text(const memory::StageMemory& m) {
  return fmt::format("params {}, grads {}, optimizer {}, activations {}, comm {}, reserve {}",
                     gib(m.params), gib(m.grads), gib(m.optimizer), gib(m.activations), gib(m.comm),
                     gib(m.reserve));
}

std::string breakdown_text(const StepCost& c) {
  const SecondsUnit unit = seconds_unit(c.step_s);
  auto seconds_text = [unit](double seconds) { return seconds_in(seconds, unit); };
  std::string text = fmt::format("step {} =", seconds_text(c.step_s));
  bool first = true;
  for (const auto& [name, value] : cost_terms(c)) {
    // A calibrated overhead may be negative (the measured run was faster than the model): the
    // terms still add up to the step, as --json's do.
    if (value == 0 && name != "compute") continue;
    const bool negative = value < 0 && !first;
    text += fmt::format("{} {} {}", first ? "" : (negative ? " -" : " +"), name,
                        seconds_text(negative ? -value : value));
    if (name == "compute" && c.recompute_s > 0) {
      text += fmt::format(" (recompute {})", seconds_text(c.recompute_s));
    }
    first = false;
  }
  return text;
}

// The per-GPU memory of the heaviest stage by category, as the text's "memory" line lists it.
json memory_json(const memory::StageMemory& stage) {
  const memory::StageBytes b = memory::whole_bytes(stage);
  return {{"params", b.params},       {"grads", b.grads},
          {"optimizer", b.optimizer}, {"activations", b.activations},
          {"comm", b.comm},           {"reserve", b.reserve},
          {"total", b.total()}};
}

json candidate_json(const Candidate& c) {
  const StepCost& k = c.cost;
  const bool moe = k.experts.moe;
  // breakdown_s holds only the terms that add up to the step; what compute is made of is apart
  // (compute_parts_s adds up to breakdown_s.compute, and recompute is inside it). A dense model's
  // has no ep_comm (its JSON is as before experts were modelled).
  json breakdown = json::object();
  for (const auto& [name, value] : cost_terms(k)) {
    if (moe || name != "ep_comm") breakdown[std::string(name)] = value;
  }
  json compute_parts = {{"gemm", k.compute_parts.gemm_s},
                        {"memory_bound", k.compute_parts.memory_bound_s},
                        {"attention_core", k.compute_parts.attention_core_s},
                        {"lm_head", k.compute_parts.head_s},
                        {"grad_accumulation", k.compute_parts.grad_accumulation_s},
                        {"recompute_included", k.recompute_s}};
  const memory::TrainingLayout& l = c.layout;
  json out = {{"dp", l.dp},
              {"tp", l.tp},
              {"pp", l.pp},
              {"cp", l.cp},
              {"vpp", l.vpp},
              {"zero", l.zero},
              {"shard", l.zero > 0 ? memory::zero_shard_ranks(l) : 1},
              {"micro_batch", l.micro_batch},
              {"micro_batches", c.micro_batches},
              {"recompute", memory::recompute_name(l.recompute)},
              {"sp", l.sp},
              {"layout", layout_label(l)},
              {"step_time_s", k.step_s},
              {"tokens_per_s", k.tokens_per_s},
              {"mfu", k.mfu},
              {"held_at_peak", k.held_at_peak},
              {"memory_bytes", memory::whole_bytes(c.heaviest).total()},
              {"memory_by_category_bytes", memory_json(c.heaviest)},
              {"capacity_bytes", truncated_bytes(c.capacity_bytes)},
              {"fits", c.fits},
              {"discouraged", c.discouraged},
              {"bubble_pct", pct(k.bubble_s, k.step_s)},
              {"bubble_of_ideal_pct", 100 * k.bubble_fraction},
              {"exposed_comm_pct", pct(k.exposed_comm_s(), k.step_s)},
              {"bottleneck", k.bottleneck},
              {"breakdown_s", breakdown},
              {"compute_parts_s", compute_parts}};
  if (k.block.exists) {
    out["block_s"] = {{"forward", k.block.forward_s}, {"backward", k.block.backward_s}};
  }
  if (moe) {
    out["compute_parts_s"]["router"] = k.compute_parts.router_s;
    out["compute_parts_s"]["routed_experts"] = k.compute_parts.routed_experts_s;
    out["compute_parts_s"]["shared_experts"] = k.compute_parts.shared_experts_s;
    out["ep"] = l.ep;
    out["expert_data_ranks"] = memory::expert_data_ranks(l);
    out["all_to_all_pct"] = pct(k.ep_comm_s, k.step_s);
    out["experts"] = experts_json(k);
  }
  return out;
}

json calibration_json(const std::vector<Calibration>& calibrations) {
  json out = json::array();
  for (const Calibration& c : calibrations) {
    json entry = {{"source", c.source}, {"run_layout", c.run_layout}, {"notes", c.notes}};
    if (c.compute_scale) {
      entry["compute"] = {{"measured_s", c.measured_compute_s},
                          {"predicted_s", c.predicted_compute_s},
                          {"predicted_gemm_s", c.predicted_gemm_s},
                          {"predicted_memory_bound_s", c.predicted_memory_s},
                          {"predicted_special_function_s", c.predicted_special_s},
                          {"scale", *c.compute_scale},
                          {"tp", c.compute_tp}};
    }
    if (c.special_function_rate) entry["special_function_rate"] = *c.special_function_rate;
    if (c.gemm_rate) {
      entry["gemm_rate_flops"] = *c.gemm_rate;
      entry["measured_gemm_s"] = c.measured_gemm_s;
    }
    if (c.optimizer_scale) {
      entry["optimizer"] = {{"measured_s", c.measured_optimizer_s},
                            {"predicted_s", c.predicted_optimizer_s},
                            {"scale", *c.optimizer_scale}};
    }
    if (c.step_scale) {
      entry["step"] = {{"measured_s", c.own_run->measured_step_s},
                       {"predicted_s", c.predicted_step_s},
                       {"scale", *c.step_scale}};
    }
    entry["collectives"] = json::array();
    for (const CollectiveFit& f : c.collectives) {
      entry["collectives"].push_back({{"op", costed_op_name(f.op)},
                                      {"level", level_key(f.level)},
                                      {"group_size", f.group_size},
                                      {"sizes", f.sizes},
                                      {"samples", f.samples},
                                      {"busbw_gbps", f.link.bandwidth / 1e9},
                                      {"rms_error", f.rms_error},
                                      {"busbw_measured", f.bandwidth_measured},
                                      {"latency_us", f.link.latency_s * 1e6}});
    }
    if (c.arrival_drift) {
      entry["arrival_drift"] = {{"jitter_sqrt_s", c.arrival_drift->drift.jitter},
                                {"interruption_s", c.arrival_drift->drift.interruption_s},
                                {"rate_spread", c.arrival_drift->drift.rate_spread},
                                {"samples", c.arrival_drift->samples},
                                {"kinds", c.arrival_drift->kinds},
                                {"rms_error", c.arrival_drift->rms_error}};
    }
    out.push_back(entry);
  }
  return out;
}

// The parallelism the calibration runs had. A layout using tensor or pipeline parallelism that
// none of them had is costed by the uncalibrated terms for it (the link model's TP all-reduces,
// p2p and bubble), however well the rest fits: its rank is an extrapolation.
struct CalibratedParallelism {
  bool known = false;  // some calibration is a built-in workload's run with its layout
  bool tp = false, pp = false;
};

CalibratedParallelism calibrated_parallelism(const std::vector<Calibration>& calibrations) {
  CalibratedParallelism out;
  for (const Calibration& c : calibrations) {
    if (!c.own_run) continue;
    out.known = true;
    out.tp = out.tp || c.own_run->estimate.layout.layout.tp > 1;
    out.pp = out.pp || c.own_run->estimate.layout.layout.pp > 1;
  }
  return out;
}

bool extrapolated(const memory::TrainingLayout& l, const CalibratedParallelism& calibrated) {
  return calibrated.known && ((l.tp > 1 && !calibrated.tp) || (l.pp > 1 && !calibrated.pp));
}

// "#2 and #4 use tensor parallelism, which no calibration run had..." or nothing.
std::string extrapolation_note(const std::vector<Candidate>& shown,
                               const CalibratedParallelism& calibrated) {
  std::vector<std::string> ranks;
  bool tp = false, pp = false;
  for (size_t i = 0; i < shown.size(); ++i) {
    if (!extrapolated(shown[i].layout, calibrated)) continue;
    ranks.push_back(fmt::format("#{}", i + 1));
    tp = tp || (shown[i].layout.tp > 1 && !calibrated.tp);
    pp = pp || (shown[i].layout.pp > 1 && !calibrated.pp);
  }
  if (ranks.empty()) return "";
  const std::string what = tp && pp ? "tensor and pipeline parallelism"
                           : tp     ? "tensor parallelism"
                                    : "pipeline parallelism";
  return fmt::format(
      "note: {} use {}, which no calibration run had: those terms are the uncalibrated model's, "
      "so their rank is an extrapolation; trace such a layout and add it to --calibrate\n",
      fmt::join(ranks, ", "), what);
}

json context_json(const RecommendContext& c) {
  return {{"model", c.model},
          {"model_notes", c.model_notes},
          {"gpu", c.gpu},
          {"gpus", c.gpus},
          {"gpus_per_node", c.gpus_per_node},
          {"global_batch", c.global_batch},
          {"seq", c.seq},
          {"cost_model", speeds_json(c.speeds)},
          {"software", software_json(c.software)},
          {"calibration", calibration_json(c.calibrations)}};
}

}  // namespace

FittedSpeeds fitted_speeds(const memory::GpuSpec& gpu, const Machines& machines, bool fp32,
                           bool flash_attention) {
  return {gpu.name,
          compute_speed(gpu, fp32).peak_flops,
          gpu.gemm_efficiency,
          gpu.gemm_overhead_us * 1e-6,
          static_cast<int>(gpu.sm_count),
          static_cast<int>(gpu.collective_sms),
          gpu.hbm_bandwidth,
          gpu.memory_efficiency,
          gpu.flash_attention_efficiency > 0 ? gpu.flash_attention_efficiency : gpu.gemm_efficiency,
          flash_attention,
          gpu.special_function_rate,
          machines.intra_node.bandwidth,
          machines.inter_node.bandwidth,
          gpu.fit_source};
}

bool ties(const StepCost& winner, const StepCost& other) {
  return other.step_s - winner.step_s < kTieFraction * winner.step_s;
}

std::string largest_loss(const StepCost& winner, const StepCost& slower, SecondsUnit unit) {
  const auto a = cost_terms(winner);
  const auto b = cost_terms(slower);
  size_t worst = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    if (b[i].second - a[i].second > b[worst].second - a[worst].second) worst = i;
  }
  const double grew = b[worst].second - a[worst].second;
  return fmt::format("{} {}{} ({} vs {})", a[worst].first, grew >= 0 ? "+" : "-",
                     seconds_in(std::abs(grew), unit), seconds_in(b[worst].second, unit),
                     seconds_in(a[worst].second, unit));
}

std::string format_calibration_text(const std::vector<Calibration>& calibrations) {
  std::string text;
  for (const Calibration& c : calibrations) {
    text += fmt::format("calibrated from {}{}:\n", c.source,
                        c.run_layout.empty() ? "" : " (a " + c.run_layout + " run)");
    if (c.compute_scale) {
      const SecondsUnit unit = seconds_unit(c.measured_compute_s);
      text += fmt::format(
          "  compute: {} per step measured vs {} predicted from the preset ({} GEMMs, {} "
          "memory-bound{}): x{:.3g}\n",
          seconds_in(c.measured_compute_s, unit), seconds_in(c.predicted_compute_s, unit),
          seconds_in(c.predicted_gemm_s, unit), seconds_in(c.predicted_memory_s, unit),
          c.predicted_special_s > 0
              ? fmt::format(", {} special-function-paced", seconds_in(c.predicted_special_s, unit))
              : "",
          *c.compute_scale);
    }
    if (c.special_function_rate) {
      text += fmt::format(
          "  special function: {:.3g} M evaluations/s, measured by the run's cores at start (the "
          "GeLU's tanh, forward and backward)\n",
          *c.special_function_rate / 1e6);
    }
    if (c.gemm_rate) {
      text += fmt::format(
          "  GEMMs: {:.3g} GFLOP/s achieved by the run's GEMMs over its steps (the mean of its "
          "ranks'), {} per step at that rate\n",
          *c.gemm_rate / 1e9, seconds_text(c.measured_gemm_s));
    }
    if (c.optimizer_scale) {
      const SecondsUnit unit = seconds_unit(c.measured_optimizer_s);
      text += fmt::format("  optimizer: {} per step measured vs {} predicted: x{:.3g}\n",
                          seconds_in(c.measured_optimizer_s, unit),
                          seconds_in(c.predicted_optimizer_s, unit), *c.optimizer_scale);
    }
    for (const CollectiveFit& f : c.collectives) {
      text += fmt::format(
          "  {} ({} ranks, {} size{}, {} samples; transfers from the last rank's arrival: busbw "
          "from their fastest quarter, latency from their mean): busbw {:.3g} GB/s{}, latency "
          "{} per step; fits the sizes' mean transfers within {:.1f}% rms\n",
          costed_op_name(f.op), f.group_size, f.sizes, f.sizes == 1 ? "" : "s", f.samples,
          f.link.bandwidth / 1e9, f.bandwidth_measured ? "" : " (kept, not measured)",
          seconds_text(f.link.latency_s), 100 * f.rms_error);
    }
    if (c.arrival_drift) {
      const ArrivalDriftFit& a = *c.arrival_drift;
      text += fmt::format(
          "  arrival drift {} ({} collectives of equal-work ranks, {} kind{}): each waits for the "
          "last rank's drift over the work W since they last synchronised: for ranks sharing "
          "cores, interruptions of length d that vary a rank's delay by jitter^2 x W (a random "
          "walk, e(n) x jitter x sqrt(W), when d is 0 or short against W; in proportion to W "
          "when d is long), for ranks on devices of their own e(n) x rate spread x W; fits the "
          "kinds' mean waits {}\n",
          arrival_drift_text(a.drift), a.samples, a.kinds, a.kinds == 1 ? "" : "s", a.rms_text());
    }
    if (c.step_scale) {
      const SecondsUnit unit = seconds_unit(c.own_run->measured_step_s);
      text += fmt::format(
          "  step: {} measured (median of the slowest rank) vs {} predicted with "
          "every calibration: x{:.3g}\n",
          seconds_in(c.own_run->measured_step_s, unit), seconds_in(c.predicted_step_s, unit),
          *c.step_scale);
    }
    for (const std::string& note : c.notes) text += "  note: " + note + "\n";
  }
  if (const auto scale = combined_step_scale(calibrations)) {
    text += fmt::format(
        "step scale x{:.3g} (geometric mean over the runs): the 'overhead' term, "
        "what the other terms leave out\n",
        *scale);
    if (*scale > 1.5 || *scale < 1 / 1.5) {
      text +=
          "  note: the terms miss much of the calibration runs' step, so layouts unlike "
          "theirs are predicted with less confidence; calibrate from runs closer to the "
          "target (model size, steps long enough to amortise per-op overhead)\n";
    }
  }
  return text;
}

std::string format_recommend_text(const RecommendContext& context, const SearchResult& result,
                                  size_t top) {
  std::string text = header(context) + format_calibration_text(context.calibrations);
  text += search_summary(result, "\n", " in " + seconds_text(context.search_seconds)) + "\n\n";
  if (result.ranked.empty()) {
    if (result.least_memory) {
      const Candidate& c = *result.least_memory;
      text += fmt::format(
          "nothing fits: the smallest layout, {}, needs {} per GPU of {}; add GPUs, "
          "a larger --gpu, or a shorter --seq / smaller --global-batch\n",
          layout_label(c.layout), gib(c.heaviest.total()), gib(c.capacity_bytes));
    } else if (!result.first_invalid.empty()) {
      text += fmt::format(
          "no layout could be costed (the counts above); the first the memory model's layout "
          "rules refused: {}\n",
          result.first_invalid);
    } else {
      text += "no layout divides this model and GPU count; see the rejected counts above\n";
    }
    return text;
  }
  const size_t shown = std::min(top, result.ranked.size());
  size_t width = 6;
  for (size_t i = 0; i < shown; ++i)
    width = std::max(width, layout_label(result.ranked[i].layout).size());
  text += table_header(width, context.moe);
  const StepCost& best = result.ranked.front().cost;
  size_t tied = 0;
  for (size_t i = 0; i < shown; ++i) {
    const bool tie = i > 0 && ties(best, result.ranked[i].cost);
    tied += tie ? 1 : 0;
    text += table_row(i + 1, result.ranked[i], width, tie, context.moe);
  }
  if (tied > 0) {
    text += fmt::format(
        "'=': within {:.0f}% of #1's step time, the model's demonstrated error: a tie, "
        "not a ranking\n",
        100 * kTieFraction);
  }
  if (context.moe) text += fmt::format("note: {}\n", moe_note());
  if (std::any_of(result.ranked.begin(), result.ranked.begin() + static_cast<long>(shown),
                  [](const Candidate& c) { return c.cost.held_at_peak; })) {
    text += fmt::format("note: {}\n", kHeldAtPeakNote);
  }
  text += training_time_text(context, result.ranked.front());
  text +=
      extrapolation_note(std::vector<Candidate>(result.ranked.begin(),
                                                result.ranked.begin() + static_cast<long>(shown)),
                         calibrated_parallelism(context.calibrations));
  return text;
}

std::string format_explain_text(const RecommendContext& context, const SearchResult& result,
                                const std::vector<Alternative>& alternatives, size_t runners_up) {
  if (result.ranked.empty()) return "";
  const Candidate& w = result.ranked.front();
  std::string text = "\n" + speeds_text(context.speeds) + software_text(context.software);
  text += fmt::format("why {} wins:\n  {}\n  {}\n", layout_label(w.layout), breakdown_text(w.cost),
                      compute_parts_text(w.cost));
  text += block_text(w.cost, w.layout.micro_batch);
  text += experts_text(w.cost, w.layout);
  if (w.layout.pp > 1) {
    text += fmt::format(
        "  pipeline bubble (p - 1)/(v m) = {}/({} x {}) = {:.1f}% of the ideal time, "
        "{} of the step\n",
        w.layout.pp - 1, w.layout.vpp, w.micro_batches, 100 * w.cost.bubble_fraction,
        format_percent(pct(w.cost.bubble_s, w.cost.step_s) / 100));
  }
  text += fmt::format("  memory {} of {} per GPU ({}); MFU {:.1f}%, bottleneck {}\n",
                      gib(w.heaviest.total()), gib(w.capacity_bytes), memory_parts_text(w.heaviest),
                      100 * w.cost.mfu, w.cost.bottleneck);
  const size_t shown = std::min(runners_up + 1, result.ranked.size());
  if (shown > 1) text += "runners-up:\n";
  for (size_t i = 1; i < shown; ++i) {
    const Candidate& c = result.ranked[i];
    const SecondsUnit unit = seconds_unit(c.cost.step_s);
    text += fmt::format("  #{} {}: {} slower ({}){}: {}\n", i + 1, layout_label(c.layout),
                        format_percent(c.cost.step_s / w.cost.step_s - 1),
                        seconds_in(c.cost.step_s, unit),
                        ties(w.cost, c.cost) ? ", a tie within the model's error" : "",
                        largest_loss(w.cost, c.cost, unit));
  }
  if (!alternatives.empty()) text += "common alternatives:\n";
  for (const Alternative& alt : alternatives) {
    const SearchResult& r = alt.result;
    if (!r.ranked.empty()) {
      const Candidate& best = r.ranked.front();
      if (layout_label(best.layout) == layout_label(w.layout)) {
        text += fmt::format("  {}: the winner is one\n", alt.name);
        continue;
      }
      const SecondsUnit unit = seconds_unit(best.cost.step_s);
      text +=
          fmt::format("  {}: best {} is {:.2f}x the winner's step time ({}): {}\n", alt.name,
                      layout_label(best.layout), best.cost.step_s / w.cost.step_s,
                      seconds_in(best.cost.step_s, unit), largest_loss(w.cost, best.cost, unit));
    } else if (r.least_memory) {
      const Candidate& c = *r.least_memory;
      text +=
          fmt::format("  {}: does not fit: its smallest, {}, needs {} per GPU of {}\n", alt.name,
                      layout_label(c.layout), gib(c.heaviest.total()), gib(c.capacity_bytes));
    } else {
      text += fmt::format(
          "  {}: not possible here ({}{}{})\n", alt.name, search_summary(r, "; "),
          r.first_invalid.empty() ? "" : "; the first the layout rules refused: ", r.first_invalid);
    }
  }
  return text;
}

std::string format_recommend_json(const RecommendContext& context, const SearchResult& result,
                                  size_t top) {
  json out = context_json(context);
  out["candidates"] = json::array();
  const CalibratedParallelism calibrated = calibrated_parallelism(context.calibrations);
  for (size_t i = 0; i < std::min(top, result.ranked.size()); ++i) {
    json candidate = candidate_json(result.ranked[i]);
    candidate["extrapolated"] = extrapolated(result.ranked[i].layout, calibrated);
    candidate["ties_best"] = i > 0 && ties(result.ranked.front().cost, result.ranked[i].cost);
    out["candidates"].push_back(std::move(candidate));
  }
  // Counts that add up: ranked + rejected = layouts_searched; rejected_splits of splits_searched.
  json rejected = json::object(), rejected_splits = json::object();
  for (const auto& [reason, count] : result.rejected) {
    (is_split_reason(reason) ? rejected_splits : rejected)[reason] = count;
  }
  out["rejected"] = rejected;
  out["rejected_splits"] = rejected_splits;
  out["layouts_searched"] = result.layouts();
  out["splits_searched"] = result.splits;
  out["costed"] = result.costed;
  out["ranked"] = result.ranked.size();
  out["search_s"] = context.search_seconds;
  if (context.moe) out["moe_note"] = moe_note();
  if (result.ranked.empty() && result.least_memory) {
    out["least_memory"] = candidate_json(*result.least_memory);
  }
  if (!result.first_invalid.empty()) out["first_invalid_layout"] = result.first_invalid;
  if (context.tokens > 0 && !result.ranked.empty()) {
    out["training_days"] = context.tokens / result.ranked.front().cost.tokens_per_s / 86400;
  }
  return dump_json(out, 2) + "\n";
}

std::string format_check_text(const RecommendContext& context, const Candidate& c) {
  std::string text = header(context) + format_calibration_text(context.calibrations);
  text += fmt::format("{}: {} — {} of {} per GPU ({})\n", layout_label(c.layout),
                      c.fits ? "fits" : "DOES NOT FIT", gib(c.heaviest.total()),
                      gib(c.capacity_bytes), memory_parts_text(c.heaviest));
  if (c.discouraged) {
    text += "discouraged: ZeRO-2/3 with PP reduce-scatters gradients after every micro-batch\n";
  }
  text += fmt::format(
      "predicted {}; {}, MFU {}, bubble {}, exposed communication {}, bottleneck {}\n",
      breakdown_text(c.cost), tokens_text(c.cost.tokens_per_s), format_percent(c.cost.mfu),
      format_percent(pct(c.cost.bubble_s, c.cost.step_s) / 100),
      format_percent(pct(c.cost.exposed_comm_s(), c.cost.step_s) / 100), c.cost.bottleneck);
  text += "  " + compute_parts_text(c.cost) + "\n" + block_text(c.cost, c.layout.micro_batch) +
          experts_text(c.cost, c.layout) + speeds_text(context.speeds) +
          software_text(context.software);
  if (context.moe) text += fmt::format("note: {}\n", moe_note());
  text += training_time_text(context, c);
  return text;
}

std::string format_check_json(const RecommendContext& context, const Candidate& candidate) {
  json out = context_json(context);
  out["candidates"] = json::array({candidate_json(candidate)});
  if (context.moe) out["moe_note"] = moe_note();
  out["rejected"] = json::object();
  return dump_json(out, 2) + "\n";
}

}  // namespace partrain::analyzers
