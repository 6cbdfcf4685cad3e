// The GPU kernels that take the most time over the analysis window (the kernels view): per kernel
// name the launches, total and mean duration and the share of all kernel time. CPU traces have
// no kernels and say so.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/finding.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct KernelRow {
  std::string name;
  int64_t count = 0;
  int64_t total_ns = 0;
  double mean_ns() const {
    return count > 0 ? static_cast<double>(total_ns) / static_cast<double>(count) : 0;
  }
  double share = 0;  // total_ns / all kernels' time in the window, 0..1
};

struct TopKernels {
  int64_t kernel_ns = 0;     // all kernels' time in the window (every rank together)
  int64_t kernel_count = 0;  // launches in the window
  size_t distinct = 0;       // kernel names, before the cut to the top N
  std::vector<KernelRow> rows;  // by total time, longest first, at most top N
};

inline constexpr size_t kDefaultTopKernels = 15;

// Kernels whose start lies in a rank's span of the window, summed over the window's ranks.
StatusOr<TopKernels> analyze_top_kernels(const profiler::TraceReader& reader,
                                         const AnalysisWindow& window,
                                         size_t top = kDefaultTopKernels);
// None: the table is information, not a diagnosis.
std::vector<Finding> top_kernels_findings(const TopKernels& report);
std::string format_top_kernels(const TopKernels& report);
nlohmann::json top_kernels_json(const TopKernels& report);

}  // namespace partrain::analyzers
