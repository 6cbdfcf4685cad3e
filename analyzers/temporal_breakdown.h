// Where each rank's time goes over the analysis window: compute, communication, memcpy and idle
// as interval unions, how much communication hides under compute, and step-time statistics
// (DESIGN.md "Analyses"; formulas in docs/analysis.md). Streams each rank's slices in time order
// (rank_breakdown.h splits them), so memory stays flat whatever the trace's size.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/finding.h"
#include "analyzers/rank_breakdown.h"
#include "analyzers/rank_rows.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct TemporalBreakdown {
  bool has_steps = false;
  std::vector<RankBreakdown> ranks;  // ascending rank
};

StatusOr<TemporalBreakdown> analyze_temporal_breakdown(const profiler::TraceReader& reader,
                                                       const AnalysisWindow& window);
// exposed_communication's severity for a mean exposed share of the window: warning from 10% (the
// finding's threshold), critical from 25%, info below (what a straggler's waiting leaves).
Severity exposed_communication_severity(double share);

// Whether any rank recorded compute: a PyTorch CPU job's host work is not seen, and then what is
// not communication is unknown, neither compute nor idle.
bool compute_recorded(const TemporalBreakdown& report);
// "exposed_communication", "idle", "compute_imbalance".
std::vector<Finding> temporal_findings(const TemporalBreakdown& report);
// Every rank, or past kRanksPrintedInFull the ones rank_rows.h picks.
std::string format_temporal_breakdown(const TemporalBreakdown& report,
                                      const RankRowOptions& rows = {});
// The "ranks" array of `partrain analyze --json`.
nlohmann::json temporal_breakdown_json(const TemporalBreakdown& report);

}  // namespace partrain::analyzers
