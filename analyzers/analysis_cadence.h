// The analysis report for a run followed live (the dashboard): `partrain analyze`'s analyses
// over its default window (warm-up step skipped), run on a cadence that bounds their cost.
// They read whole windows of the trace (and a running trace has no indexes), so they run when
// the trace has changed and at most once per max(kMinInterval, kCostFactor x their last
// duration): at most 1/kCostFactor of a core on average, once in all for a finished trace.
#pragma once

#include <cstdint>
#include <optional>

#include "analyzers/live_run.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

class AnalysisCadence {
 public:
  static constexpr int64_t kMinIntervalNs = 5'000'000'000;
  static constexpr int64_t kCostFactor = 40;

  // Whether to run now: never run yet, or the trace changed since the last run and the pause
  // after it has passed.
  bool due(int64_t now_ns) const;
  void trace_changed() { changed_ = true; }
  void ran(int64_t started_ns, int64_t finished_ns);

 private:
  std::optional<int64_t> last_end_ns_;
  int64_t last_cost_ns_ = 0;
  bool changed_ = false;
};

// Runs the analyses into `out` (replacing what was there). A trace too young for a window (no
// step recorded yet) is a note, not an error; unreadable pages are errors (exit 3).
Status refresh_analysis(const profiler::TraceReader& reader, LiveAnalysis& out);

}  // namespace partrain::analyzers
