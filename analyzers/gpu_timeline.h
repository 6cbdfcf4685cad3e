// Where each rank's GPU time goes, as HolisticTraceAnalysis defines it (its temporal breakdown
// and communication/computation overlap), so a GPU trace reads the same in `partrain analyze`
// and in HTA given `partrain export`'s per-rank files (docs/analysis.md, "GPU time"). The rank
// breakdown (temporal_breakdown.h) splits the rank's whole window, host included; this one
// looks at the CUDA streams alone, from the first GPU activity to the last.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/finding.h"
#include "analyzers/rank_rows.h"
#include "core/status.h"
#include "profiler/trace_event.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

// What a GPU slice's time counts as, by HTA's rules on names: NCCL's kernels (activity.h's
// is_nccl_kernel, which the rank breakdown counts as communication too) communicate; copies, fills
// and kernels named like them (containing "Memcpy", starting with "Memset") or like a wait
// (containing "Sync") are neither; every other kernel computes.
enum class GpuWork : uint8_t { kCompute, kComm, kOther };
GpuWork gpu_work_of(profiler::SliceCategory category, std::string_view name);

// Times in ns over one rank's GPU span: its kernels, copies and fills that start in the rank's
// span of the window, from the earliest start to the latest end. Each is a union of intervals,
// so concurrent streams count once.
struct GpuTimeline {
  int rank = 0;
  int64_t span_ns = 0;
  int64_t busy_ns = 0;     // |all|
  int64_t compute_ns = 0;  // |compute kernels|
  int64_t comm_ns = 0;     // |NCCL kernels|
  int64_t overlap_ns = 0;  // |compute ∩ comm|

  int64_t idle_ns() const { return span_ns - busy_ns; }
  int64_t non_compute_ns() const { return busy_ns - compute_ns; }
  double pct_of_span(int64_t ns) const;       // 0 for an empty span
  std::optional<double> overlap_pct() const;  // |compute ∩ comm| / |comm|
};

struct GpuTimelineReport {
  std::vector<GpuTimeline> ranks;  // ascending; ranks without GPU activity are left out
};

StatusOr<GpuTimelineReport> analyze_gpu_timeline(const profiler::TraceReader& reader,
                                                 const AnalysisWindow& window);
// None: the rank breakdown's findings judge the same time.
std::vector<Finding> gpu_timeline_findings(const GpuTimelineReport& report);
// Empty for a trace without GPU activity.
std::string format_gpu_timeline(const GpuTimelineReport& report, const RankRowOptions& rows = {});
nlohmann::json gpu_timeline_json(const GpuTimelineReport& report);

}  // namespace partrain::analyzers
