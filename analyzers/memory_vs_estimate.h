// Measured memory against the estimator: per rank and category the peak of memory_events next to
// what memory::estimate_memory predicts for the run's model and layout (read from runs.config for
// the built-in workloads), with the error in percent (DESIGN.md "Analyses": memory peak per
// category vs estimate). Other runs get their peaks only.
#pragma once

#include <array>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/finding.h"
#include "core/status.h"
#include "memory/category.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct CategoryPeak {
  memory::Category category = memory::Category::kOther;
  double peak_bytes = 0;                // max of memory_events.bytes
  std::optional<double> estimate_bytes; // nullopt: no estimate (foreign run, or no such line)
  // (peak - estimate) / estimate in percent; nullopt without an estimate or with estimate 0.
  std::optional<double> error_pct() const;
};

struct RankMemory {
  int rank = 0;
  int pp_stage = 0;
  std::vector<CategoryPeak> categories;  // categories the rank sampled or the estimate names
  double peak_total_bytes = 0;           // max over time of the sum over categories
  std::optional<double> estimate_total_bytes;  // the estimate without the reserve
  // Any memory sample at all: a PyTorch job's memory comes from the CUDA caching allocator, so a
  // CPU job's ranks have none, and their peak is unknown, not 0 B.
  bool recorded = false;
};

struct MemoryVsEstimate {
  bool has_estimate = false;
  std::string estimate_note;  // what was estimated, or why nothing was
  std::vector<RankMemory> ranks;
  bool imported = false;  // from `partrain import`: memory is what the profile sampled
  // Imported ranks whose samples are torch.profiler's CPU allocator's: allocations since
  // profiling began, not bytes in use (the stat import_cpu_memory_relative).
  std::vector<int> relative_ranks;
};

// Why a rank has no memory samples: a traced CPU job has none; an imported profile had
// profile_memory off (or no allocation while it ran). One text for analyze and top.
std::string memory_unrecorded_reason(bool imported);

StatusOr<MemoryVsEstimate> analyze_memory_vs_estimate(const profiler::TraceReader& reader,
                                                      const AnalysisWindow& window);
// "memory_estimate_error": a category holding >= 10% of the rank's peak off by more than 20%.
std::vector<Finding> memory_vs_estimate_findings(const MemoryVsEstimate& report);
std::string format_memory_vs_estimate(const MemoryVsEstimate& report);
nlohmann::json memory_vs_estimate_json(const MemoryVsEstimate& report);

}  // namespace partrain::analyzers
