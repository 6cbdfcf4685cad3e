#include "analyzers/analysis_cadence.h"

#include <algorithm>

#include "core/clock.h"

namespace partrain::analyzers {

bool AnalysisCadence::due(int64_t now_ns) const {
  if (!last_end_ns_) return true;
  if (!changed_) return false;
  return now_ns - *last_end_ns_ >= std::max(kMinIntervalNs, kCostFactor * last_cost_ns_);
}

void AnalysisCadence::ran(int64_t started_ns, int64_t finished_ns) {
  last_end_ns_ = finished_ns;
  last_cost_ns_ = finished_ns - started_ns;
  changed_ = false;
}

Status refresh_analysis(const profiler::TraceReader& reader, LiveAnalysis& out) {
  const int64_t started = monotonic_ns();
  // `partrain analyze`'s default: the first step is warm-up, unless it is the only one (a young
  // run: analyse it rather than nothing).
  WindowOptions options;
  options.skip_is_default = true;
  StatusOr<AnalysisWindow> window = choose_window(reader, options);
  if (!window.is_ok()) {
    if (window.status().code() != StatusCode::kInvalidArgument) return window.status();
    out = LiveAnalysis{};
    out.note = "no steps to analyse yet";
    return Status::ok();
  }
  ASSIGN_OR_RETURN(AnalysisReport report, analyze_run(reader, *window));
  LiveAnalysis analysis;
  analysis.note = describe_window(*window);
  analysis.report = std::move(report);
  analysis.computed_ns = monotonic_ns() - started;
  out = std::move(analysis);
  return Status::ok();
}

}  // namespace partrain::analyzers
