// How estimates are shown: aligned text tables (GiB and GB side by side, labelled) and the JSON
// shape of `partrain memory --json`, shared by every command that prints an estimate.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "memory/explain.h"
#include "memory/memory_estimate.h"
#include "memory/sweep.h"

namespace partrain::memory {

struct ReportContext {
  std::string model_name;
  std::string gpu_name;  // empty: no capacity known
  // Why the capacity is no host's or GPU's measured memory (the cpu preset's placeholder, which
  // every rank on a host shares); empty: a device's own.
  std::string capacity_caveat;
};

std::string format_estimate_text(const EstimateInput& input, const MemoryEstimate& estimate,
                                 const ReportContext& context, bool per_stage);
// {"per_gpu_bytes": {params, grads, optimizer, activations, comm, kv_cache, reserve, total},
//  "capacity_bytes", "fits", "stage", "stages": [...]} with bytes as integers.
std::string format_estimate_json(const EstimateInput& input, const MemoryEstimate& estimate,
                                 const ReportContext& context);
std::string format_explain_text(const std::vector<ExplainLine>& lines);
// A pipeline with fewer micro-batches per step than stages: its bubble, and the --global-batch
// that gives m = 4 p (Megatron-LM's rule of thumb); nullopt otherwise.
std::optional<std::string> pipeline_bubble_advice(const EstimateInput& input,
                                                  const MemoryEstimate& estimate);
std::string format_sweep_text(const SweepReport& report, const ReportContext& context);
std::string format_sweep_json(const SweepReport& report, const ReportContext& context);

}  // namespace partrain::memory
