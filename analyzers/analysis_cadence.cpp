#include "analyzers/analysis_cadence.h"

#include <algorithm>

#include "analyzers/collective_groups.h"
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
  // A run with no rank yet: one may still come. An ended one's report says none came.
  bool no_rank_yet = false;
  if (window.is_ok() && window->ranks.empty()) {
    ASSIGN_OR_RETURN(const bool ended, run_has_ended(reader));
    no_rank_yet = !ended;
  }
  if (!window.is_ok() || no_rank_yet) {
    if (!window.is_ok() && window.status().code() != StatusCode::kInvalidArgument) {
      return window.status();
    }
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
