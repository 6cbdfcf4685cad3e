// Expert load of a mixture-of-experts run, per MoE layer over the window's steps: how evenly the
// router spread the token-to-expert assignments over the experts and, when the run's ep is known
// from its config, over the ep ranks that hold them (the expert part of a step runs at the pace
// of the most loaded ep rank), the share it dropped for want of capacity and its hottest expert
// (docs/analysis.md "Expert load"). The records are the workload's (RankTracer::expert_load).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/finding.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

// The load ratio at and above which the expert phase is imbalanced enough to report: the most
// loaded ep rank then takes at least 1.25x the mean, so the other ranks idle at least 20% of the
// expert phase, and a router that uneven would already overflow Switch's default capacity
// factor of 1.25 (Fedus 2021). At 2x half the group's expert compute idles.
inline constexpr double kExpertImbalanceWarning = 1.25;
inline constexpr double kExpertImbalanceCritical = 2.0;
// Dropped assignments at and above this share of those routed: each one skips its expert.
inline constexpr double kDroppedTokensWarning = 0.01;

// One MoE layer over the window. Ratios are max / mean, per step, then averaged over the steps
// (each step waits on its own most loaded rank); steps that routed nothing are left out.
struct ExpertLayerBalance {
  int layer = 0;
  int experts = 0;
  int rank = 0;                // whose records were read (the lowest that recorded the layer)
  int64_t steps = 0;           // steps with routed assignments
  double routed_per_step = 0;  // token-to-expert assignments per step
  double expert_ratio = 0;     // over experts
  double expert_ratio_worst = 0;
  int64_t expert_worst_step = -1;
  // Over ep ranks (experts [r E/ep, (r+1) E/ep) on ep rank r, Megatron's placement), when the
  // run's ep is known and divides the experts.
  std::optional<double> ep_ratio;
  std::optional<double> ep_ratio_worst;
  int64_t ep_worst_step = -1;
  std::optional<int> busiest_ep_rank;  // most assignments over the window
  double dropped_share = 0;            // dropped / routed over the window
  int hottest_expert = 0;              // most assignments over the window
  double hottest_share = 0;            // its share of them
  std::optional<double> aux_loss;      // mean over the steps that reported one
  // What gates the step: the ep ranks' ratio; the experts' when ep is unknown (as if each expert
  // had a rank of its own, the most it can be); nullopt with ep 1 (no rank waits on another).
  std::optional<double> gating_ratio(std::optional<int> ep) const;
};

struct ExpertLoadReport {
  bool applicable = false;
  std::string reason;                      // why not, when not applicable
  std::optional<int> ep;                   // the run's expert-parallel degree, from its config
  std::vector<ExpertLayerBalance> layers;  // by layer
};

StatusOr<ExpertLoadReport> analyze_expert_load(const profiler::TraceReader& reader,
                                               const AnalysisWindow& window);
// The same with the run's ep given (nullopt: unknown), for a caller that has read the config.
StatusOr<ExpertLoadReport> analyze_expert_load(const profiler::TraceReader& reader,
                                               const AnalysisWindow& window, std::optional<int> ep);
// The expert-parallel degree a run's config (runs.config) gives; nullopt for none (a foreign
// job's, or no layout.ep).
std::optional<int> run_ep(const std::string& config_json);
// "expert_imbalance": the worst layer's gating ratio at kExpertImbalanceWarning or more, or a
// dropped share at kDroppedTokensWarning or more, or (ep 1) a router sending one expert twice
// its share; one finding for the run, naming the worst layer and how many others are over.
std::vector<Finding> expert_load_findings(const ExpertLoadReport& report);
// Empty when not applicable (a dense run has no section).
std::string format_expert_load(const ExpertLoadReport& report);
nlohmann::json expert_load_json(const ExpertLoadReport& report);

}  // namespace partrain::analyzers
