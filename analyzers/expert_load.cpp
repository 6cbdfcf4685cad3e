// analyze_expert_load: per MoE layer, the lowest recording rank's rows of the window's steps
// (every rank of the layer's group holds the same counts), summed per expert and per ep rank.
#include "analyzers/expert_load.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "analyzers/workload_run_config.h"
#include "core/number_format.h"
#include "profiler/trace_reader/expert_reads.h"

namespace partrain::analyzers {
namespace {

using profiler::TraceReader;

// An ep above this in a config is not one (no layer has more experts to shard).
constexpr int64_t kMaxExpertsEp = 4096;

// A running max / mean over the steps, and the step where it was largest.
struct RatioSum {
  double sum = 0;
  int64_t steps = 0;
  double worst = 0;
  int64_t worst_step = -1;
  void add(double ratio, int64_t step) {
    sum += ratio;
    ++steps;
    if (ratio > worst) {
      worst = ratio;
      worst_step = step;
    }
  }
  double mean() const { return steps > 0 ? sum / static_cast<double>(steps) : 0; }
};

// max / mean of `loads` whose sum is `total` (> 0).
double max_over_mean(const std::vector<int64_t>& loads, double total) {
  const int64_t max = *std::max_element(loads.begin(), loads.end());
  return static_cast<double>(max) * static_cast<double>(loads.size()) / total;
}

// Megatron's placement: ep rank r holds experts [r E/ep, (r+1) E/ep).
void sum_per_ep_rank(const std::vector<int64_t>& tokens, int ep, std::vector<int64_t>& out) {
  out.assign(static_cast<size_t>(ep), 0);
  const size_t per_rank = tokens.size() / static_cast<size_t>(ep);
  for (size_t e = 0; e < tokens.size(); ++e) out[e / per_rank] += tokens[e];
}

size_t index_of_max(const std::vector<int64_t>& values) {
  return static_cast<size_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

StatusOr<ExpertLayerBalance> balance_of_layer(const TraceReader& reader,
                                              const profiler::ExpertLayerSource& source,
                                              const profiler::StepFilter& steps,
                                              std::optional<int> ep) {
  ExpertLayerBalance out;
  out.layer = source.layer;
  out.rank = source.rank;
  ASSIGN_OR_RETURN(profiler::ExpertLoadCursor rows,
                   profiler::expert_loads(reader, source.rank, source.layer, steps));
  std::vector<int64_t> per_expert, per_rank, step_ranks;
  double routed = 0, dropped = 0, aux_sum = 0;
  int64_t aux_steps = 0;
  RatioSum experts, ranks;
  profiler::ExpertLoadRow row;
  while (rows.next(row)) {
    const std::vector<int64_t>& tokens = row.tokens_per_expert;
    if (tokens.empty()) continue;
    if (tokens.size() > per_expert.size()) per_expert.resize(tokens.size(), 0);
    for (size_t e = 0; e < tokens.size(); ++e) per_expert[e] += std::max<int64_t>(tokens[e], 0);
    dropped += static_cast<double>(std::max<int64_t>(row.dropped_tokens, 0));
    if (row.aux_loss) {
      aux_sum += *row.aux_loss;
      ++aux_steps;
    }
    const double step_routed = static_cast<double>(
        std::accumulate(tokens.begin(), tokens.end(), int64_t{0},
                        [](int64_t a, int64_t t) { return a + std::max<int64_t>(t, 0); }));
    if (step_routed <= 0) continue;
    routed += step_routed;
    experts.add(max_over_mean(tokens, step_routed), row.step);
    if (ep && *ep > 1 && tokens.size() % static_cast<size_t>(*ep) == 0) {
      sum_per_ep_rank(tokens, *ep, step_ranks);
      ranks.add(max_over_mean(step_ranks, step_routed), row.step);
    }
  }
  RETURN_IF_ERROR(rows.status());
  out.experts = static_cast<int>(per_expert.size());
  out.steps = experts.steps;
  if (out.steps > 0) out.routed_per_step = routed / static_cast<double>(out.steps);
  out.expert_ratio = experts.mean();
  out.expert_ratio_worst = experts.worst;
  out.expert_worst_step = experts.worst_step;
  if (ranks.steps > 0) {
    out.ep_ratio = ranks.mean();
    out.ep_ratio_worst = ranks.worst;
    out.ep_worst_step = ranks.worst_step;
    sum_per_ep_rank(per_expert, *ep, per_rank);
    out.busiest_ep_rank = static_cast<int>(index_of_max(per_rank));
  }
  if (routed > 0) {
    out.dropped_share = std::min(dropped / routed, 1.0);
    out.hottest_expert = static_cast<int>(index_of_max(per_expert));
    out.hottest_share =
        static_cast<double>(per_expert[static_cast<size_t>(out.hottest_expert)]) / routed;
  }
  if (aux_steps > 0) out.aux_loss = aux_sum / static_cast<double>(aux_steps);
  return out;
}

std::string ratio_text(double ratio) { return format_decimal(ratio, 2) + "x"; }

// "layer 3: the most loaded of 4 ep ranks (ep rank 1) takes 1.62x the mean of the token
// assignments (worst 2.10x at step 7)".
std::string gating_evidence(const ExpertLayerBalance& l, std::optional<int> ep) {
  if (l.ep_ratio) {
    return fmt::format(
        "layer {}: the most loaded of {} ep ranks (ep rank {}) gets {} the mean of the token "
        "assignments per step (worst {} at step {}), so the others wait {} of the expert phase",
        l.layer, *ep, l.busiest_ep_rank.value_or(0), ratio_text(*l.ep_ratio),
        ratio_text(*l.ep_ratio_worst), l.ep_worst_step, format_percent(1 - 1 / *l.ep_ratio));
  }
  return fmt::format(
      "layer {}: the most loaded of {} experts gets {} the mean of the token assignments per "
      "step (worst {} at step {}); the run's ep is unknown, so this is what an ep rank per "
      "expert would wait on",
      l.layer, l.experts, ratio_text(l.expert_ratio), ratio_text(l.expert_ratio_worst),
      l.expert_worst_step);
}

std::string hottest_evidence(const ExpertLayerBalance& l) {
  return fmt::format("expert {} is the hottest with {} of the assignments (an even share is {})",
                     l.hottest_expert, format_percent(l.hottest_share),
                     format_percent(l.experts > 0 ? 1.0 / l.experts : 0));
}

}  // namespace

std::optional<int> run_ep(const std::string& config_json) {
  if (const std::optional<WorkloadRunConfig> config = parse_workload_run_config(config_json)) {
    return config->resolved.layout.ep;
  }
  // A config this build does not resolve (a model field it does not know) still says its ep.
  const nlohmann::json j = nlohmann::json::parse(config_json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("layout") || !j["layout"].is_object()) {
    return std::nullopt;
  }
  const nlohmann::json ep = j["layout"].value("ep", nlohmann::json());
  if (!ep.is_number_integer() || ep.get<int64_t>() < 1 || ep.get<int64_t>() > kMaxExpertsEp) {
    return std::nullopt;
  }
  return ep.get<int>();
}

std::optional<double> ExpertLayerBalance::gating_ratio(std::optional<int> ep) const {
  if (ep_ratio) return ep_ratio;
  // ep 1 (no rank waits on another), or an ep that does not divide the experts (no placement
  // to weigh).
  if (ep) return std::nullopt;
  return expert_ratio;
}

StatusOr<ExpertLoadReport> analyze_expert_load(const TraceReader& reader,
                                               const AnalysisWindow& window,
                                               std::optional<int> ep) {
  ExpertLoadReport out;
  out.ep = ep;
  const profiler::StepFilter steps = step_filter(window);
  ASSIGN_OR_RETURN(const std::vector<profiler::ExpertLayerSource> sources,
                   profiler::expert_layer_sources(reader, steps));
  if (sources.empty()) {
    out.reason = "no expert-load records in the window (not a mixture-of-experts run)";
    return out;
  }
  for (const profiler::ExpertLayerSource& source : sources) {
    ASSIGN_OR_RETURN(ExpertLayerBalance layer, balance_of_layer(reader, source, steps, ep));
    if (layer.steps > 0) out.layers.push_back(std::move(layer));
  }
  out.applicable = !out.layers.empty();
  if (!out.applicable) out.reason = "the expert-load records of the window routed no tokens";
  return out;
}

StatusOr<ExpertLoadReport> analyze_expert_load(const TraceReader& reader,
                                               const AnalysisWindow& window) {
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  return analyze_expert_load(reader, window, run ? run_ep(run->config) : std::nullopt);
}

namespace {

// The layers the finding is about.
struct NotableLayers {
  const ExpertLayerBalance* worst = nullptr;  // highest gating ratio
  double worst_ratio = 0;
  int over = 0;  // layers at kExpertImbalanceWarning or more
  const ExpertLayerBalance* most_dropped = nullptr;
  const ExpertLayerBalance* collapsed = nullptr;  // no gating, an expert at twice its share
};

NotableLayers notable_layers(const ExpertLoadReport& report) {
  NotableLayers n;
  for (const ExpertLayerBalance& l : report.layers) {
    const std::optional<double> gating = l.gating_ratio(report.ep);
    if (gating && *gating >= kExpertImbalanceWarning) ++n.over;
    if (gating && (!n.worst || *gating > n.worst_ratio)) {
      n.worst = &l;
      n.worst_ratio = *gating;
    }
    if (!n.most_dropped || l.dropped_share > n.most_dropped->dropped_share) n.most_dropped = &l;
    if (!gating && l.expert_ratio >= kExpertImbalanceCritical &&
        (!n.collapsed || l.expert_ratio > n.collapsed->expert_ratio)) {
      n.collapsed = &l;
    }
  }
  return n;
}

std::string expert_advice(const ExpertLoadReport& report, const NotableLayers& n, bool dropping) {
  std::string advice =
      n.worst && !n.worst->aux_loss
          ? "add a load-balancing auxiliary loss (none is recorded)"
          : "raise the load-balancing loss coefficient (Switch and GShard use about 1e-2)";
  advice += dropping
                ? "; raise the capacity factor (1.25 to 2) or route dropless"
                : "; a capacity factor (1.25) bounds what one expert takes, at the cost of drops";
  if (report.ep && *report.ep > 1) {
    advice +=
        "; place more experts per ep rank (a lower --ep), so one hot expert weighs less on its "
        "rank";
  }
  return advice +
         "; check the router's initialisation (a small init keeps early routing near uniform)";
}

}  // namespace

std::vector<Finding> expert_load_findings(const ExpertLoadReport& report) {
  if (!report.applicable) return {};
  const NotableLayers n = notable_layers(report);
  const bool imbalanced = n.worst_ratio >= kExpertImbalanceWarning;
  const bool dropping = n.most_dropped->dropped_share >= kDroppedTokensWarning;
  if (!imbalanced && !dropping && !n.collapsed) return {};

  Finding f;
  f.kind = "expert_imbalance";
  std::vector<std::string> evidence;
  if (imbalanced) {
    f.severity =
        n.worst_ratio >= kExpertImbalanceCritical ? Severity::kCritical : Severity::kWarning;
    // The expert phase's idle share on the ranks that wait; of the step, that times the expert
    // phase's share of it.
    f.impact = 1 - 1 / n.worst_ratio;
    evidence.push_back(gating_evidence(*n.worst, report.ep) + "; " + hottest_evidence(*n.worst));
    if (n.over > 1) {
      evidence.push_back(fmt::format("{} of the {} MoE layers are at {} or more", n.over,
                                     report.layers.size(), ratio_text(kExpertImbalanceWarning)));
    }
  } else if (n.collapsed) {
    f.severity = Severity::kInfo;
    evidence.push_back(fmt::format(
        "layer {}: with ep 1 no rank waits on another, but the most loaded of {} experts gets {} "
        "the mean of the assignments; {}",
        n.collapsed->layer, n.collapsed->experts, ratio_text(n.collapsed->expert_ratio),
        hottest_evidence(*n.collapsed)));
  }
  if (dropping) {
    if (!imbalanced) f.severity = Severity::kWarning;
    f.impact = std::max(f.impact, n.most_dropped->dropped_share);
    evidence.push_back(fmt::format(
        "layer {} dropped {} of its token assignments for want of capacity (each skips its expert)",
        n.most_dropped->layer, format_percent(n.most_dropped->dropped_share)));
  }
  for (size_t i = 0; i < evidence.size(); ++i) f.evidence += (i > 0 ? "; " : "") + evidence[i];
  f.advice = expert_advice(report, n, dropping);
  return {std::move(f)};
}

std::string format_expert_load(const ExpertLoadReport& report) {
  if (!report.applicable) return "";
  const bool ep_known = report.ep.has_value();
  std::string out = fmt::format(
      "Expert load ({} MoE layer{}, ep {}; ratios are max / mean per step, averaged over the "
      "steps; worst step in brackets)\n",
      report.layers.size(), report.layers.size() == 1 ? "" : "s",
      ep_known ? std::to_string(*report.ep) : "unknown");
  out += fmt::format("{:>5}  {:>7}  {:>13}  {:>16}  {:>16}  {:>8}  {:>15}  {:>9}\n", "layer",
                     "experts", "assign/step", "experts max/mean", "ep max/mean", "dropped",
                     "hottest expert", "aux loss");
  for (const ExpertLayerBalance& l : report.layers) {
    const std::string expert_cell =
        fmt::format("{} ({}@{})", ratio_text(l.expert_ratio), ratio_text(l.expert_ratio_worst),
                    l.expert_worst_step);
    const std::string ep_cell = l.ep_ratio
                                    ? fmt::format("{} ({}@{})", ratio_text(*l.ep_ratio),
                                                  ratio_text(*l.ep_ratio_worst), l.ep_worst_step)
                                    : (report.ep && *report.ep == 1 ? "- (ep 1)" : "-");
    out += fmt::format("{:>5}  {:>7}  {:>13}  {:>16}  {:>16}  {:>8}  {:>15}  {:>9}\n", l.layer,
                       l.experts, format_decimal(l.routed_per_step, 0), expert_cell, ep_cell,
                       format_percent(l.dropped_share),
                       fmt::format("{} ({})", l.hottest_expert, format_percent(l.hottest_share)),
                       l.aux_loss ? format_decimal(*l.aux_loss, 4) : "-");
  }
  return out;
}

nlohmann::json expert_load_json(const ExpertLoadReport& report) {
  nlohmann::json out = {{"applicable", report.applicable}};
  out["ep"] = report.ep ? nlohmann::json(*report.ep) : nlohmann::json(nullptr);
  if (!report.applicable) {
    out["reason"] = report.reason;
    return out;
  }
  auto or_null = [](const auto& value) {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  nlohmann::json layers = nlohmann::json::array();
  for (const ExpertLayerBalance& l : report.layers) {
    layers.push_back(
        {{"layer", l.layer},
         {"experts", l.experts},
         {"rank", l.rank},
         {"steps", l.steps},
         {"assignments_per_step", l.routed_per_step},
         {"expert_load_ratio", l.expert_ratio},
         {"expert_load_ratio_worst", l.expert_ratio_worst},
         {"expert_worst_step", l.expert_worst_step},
         {"ep_load_ratio", or_null(l.ep_ratio)},
         {"ep_load_ratio_worst", or_null(l.ep_ratio_worst)},
         {"ep_worst_step", l.ep_ratio ? nlohmann::json(l.ep_worst_step) : nlohmann::json(nullptr)},
         {"busiest_ep_rank", or_null(l.busiest_ep_rank)},
         {"gating_load_ratio", or_null(l.gating_ratio(report.ep))},
         {"dropped_pct", 100 * l.dropped_share},
         {"hottest_expert", l.hottest_expert},
         {"hottest_expert_pct", 100 * l.hottest_share},
         {"aux_loss", or_null(l.aux_loss)}});
  }
  out["layers"] = layers;
  return out;
}

}  // namespace partrain::analyzers
