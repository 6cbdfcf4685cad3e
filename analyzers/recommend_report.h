// What `partrain recommend` prints: the ranked table, --explain (why the winner wins, why the
// runners-up and the common alternatives lose, with numbers), and --json with the same facts.
#pragma once

#include <string>
#include <vector>

#include "analyzers/calibration.h"
#include "analyzers/layout_search.h"
#include "analyzers/report_numbers.h"

namespace partrain::analyzers {

// The speeds the model costs kernels and links at (--explain's "cost model" lines, --json's
// "cost_model"): the preset's datasheet figures and fitted values, and what they were fitted to.
struct FittedSpeeds {
  std::string gpu;
  double peak_flops = 0;
  double gemm_efficiency = 0;
  double gemm_overhead_s = 0;
  int sm_count = 0;
  int collective_sms = 0;  // SMs an overlapped collective takes from compute
  double memory_bandwidth = 0;
  double memory_efficiency = 0;
  double flash_attention_efficiency = 0;
  bool flash_attention = false;  // the attention core costed as FlashAttention, else materialised
  double special_function_rate = 0;  // evaluations/s; 0: memory paces every elementwise kernel
  double intra_node_busbw = 0;  // bytes/s, after the fitted efficiency (or the cluster's)
  double inter_node_busbw = 0;
  std::string fit_source;
};
// `fp32`: the recipe computes in fp32 (the peak is the GPU's fp32 one, as the cost model uses).
FittedSpeeds fitted_speeds(const memory::GpuSpec& gpu, const Machines& machines, bool fp32,
                           bool flash_attention);

// Candidates whose step times differ by less than this fraction tie: the model's demonstrated
// error, the mean |error| over the validation set of published runs (docs/recommend.md), rounded
// up.
inline constexpr double kTieFraction = 0.05;
bool ties(const StepCost& winner, const StepCost& other);

// How the framework is costed to train (recommend's --precision, --overlap-grad-reduce,
// --overlap-param-gather, --tp-backward-overlap, --grad-accumulation, --pipeline-p2p,
// --zero3-recompute and --dropout), said beside the speeds.
struct SoftwareSettings {
  std::string precision;  // the recipe's name
  double grad_bytes = 0;  // per parameter: what the gradient collectives move
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool tp_backward_overlap = true;
  std::string grad_accumulation;  // fused, autograd, fp32 or deepspeed-bf16
  std::string pipeline_p2p;       // scatter-gather, deepspeed or full
  std::string zero3_recompute;    // regather or reuse (ZeRO-3's gathers under full recompute)
  double dropout = 0;             // hidden and attention dropout probability
  std::string dropout_source;     // "--dropout", "the model's published recipe", ...
};

// Megatron-LM's --hidden-dropout and --attention-dropout default (megatron/training/arguments.py):
// recommend's dropout for a model whose recipe is not published.
inline constexpr double kMegatronDropout = 0.1;

struct RecommendContext {
  std::string model;  // preset name or "custom"
  std::string gpu;
  int gpus = 1;
  int gpus_per_node = 8;
  int64_t global_batch = 1;
  int64_t seq = 1;
  std::vector<Calibration> calibrations;
  double search_seconds = 0;
  FittedSpeeds speeds;
  SoftwareSettings software;
  double tokens = 0;  // > 0: --tokens, the training time is reported
  bool moe = false;   // a mixture of experts: ep, all_to_all and the experts' terms are shown
  std::vector<std::string> model_notes;  // what the model's count approximates (ModelConfig::notes)
};

// One of explain's "common alternatives": the best of a family, or why none of it fits.
struct Alternative {
  std::string name;  // "data parallel only (ZeRO-0)"
  SearchResult result;
};

std::string format_recommend_text(const RecommendContext& context, const SearchResult& result,
                                  size_t top);
std::string format_explain_text(const RecommendContext& context, const SearchResult& result,
                                const std::vector<Alternative>& alternatives, size_t runners_up);
std::string format_recommend_json(const RecommendContext& context, const SearchResult& result,
                                  size_t top);
// --check: one layout, fitting or not.
std::string format_check_text(const RecommendContext& context, const Candidate& candidate);
std::string format_check_json(const RecommendContext& context, const Candidate& candidate);
// What each --calibrate trace replaced, for the text report.
std::string format_calibration_text(const std::vector<Calibration>& calibrations);

// The term of `slower` that grew most over `winner`'s, as "bubble +0.41 s", in `unit` (the
// unit of the line it ends: one unit per line).
std::string largest_loss(const StepCost& winner, const StepCost& slower, SecondsUnit unit);

}  // namespace partrain::analyzers
