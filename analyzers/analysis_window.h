// What an analysis looks at: which ranks, which steps, and the time span of those steps on each
// rank (DESIGN.md "Analyses": per rank over a window of steps, warm-up excluded). Every analyzer
// takes the same window, so their numbers describe the same stretch of the run. A trace without
// steps (a foreign job under `partrain trace`) is one window from its first to its last event.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "profiler/trace_reader/step_reads.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

// Inclusive training steps; an open end is nullopt ("3:" is {3, nullopt}).
struct StepSelection {
  std::optional<int64_t> first;
  std::optional<int64_t> last;
};

struct WindowOptions {
  std::vector<int> ranks;                // empty: every rank of the trace
  std::optional<StepSelection> steps;    // explicit steps win over skip_steps
  int skip_steps = 1;                    // warm-up steps left out (`--skip-steps`)
  // skip_steps is the default, not asked for: a trace with a single step (a run that failed or
  // was stopped early) keeps it rather than leaving nothing to analyse.
  bool skip_is_default = false;
};

// One rank's part of the window on the run-wide timeline.
struct RankSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t steps = 0;  // steps of this rank inside the window (0 for a trace without steps)
  int64_t duration_ns() const { return end_ns - start_ns; }
};

struct AnalysisWindow {
  std::string run_id;
  int world_size = 0;
  bool has_steps = false;  // false: the whole run is one window
  int64_t first_step = -1;
  int64_t last_step = -1;
  int skipped_steps = 0;         // warm-up steps left out (0 when --steps chose the steps)
  bool steps_selected = false;   // the steps came from an explicit selection
  bool ranks_selected = false;   // --rank chose the ranks
  // The run recorded one step (a hang, a crash early on), which the window keeps although it is
  // the warm-up: what differs between ranks there may be one-off start-up costs.
  bool warm_up_only = false;
  std::vector<int> ranks;          // analysed ranks, ascending
  std::map<int, RankSpan> spans;   // per analysed rank
  int64_t start_ns = 0;            // earliest span start
  int64_t end_ns = 0;              // latest span end
  // A job torchrun restarted: where its earlier attempts' steps ended. The window's steps are
  // the last attempt's; rows of their numbers before this are an earlier attempt's.
  int64_t earlier_attempts_end = std::numeric_limits<int64_t>::min();
};

// The window's steps as the trace reader filters rows by step; a trace without steps is one
// window (every row, the ones with no step too).
inline profiler::StepFilter step_filter(const AnalysisWindow& window) {
  return {window.first_step, window.last_step, !window.has_steps, window.earlier_attempts_end};
}

// kInvalidArgument (exit 2) naming the ranks or steps the trace has when the selection asks for
// others, or when skipping warm-up leaves no step ("--skip-steps 1 leaves none of the 1 steps").
// A trace in which no process became a rank is a window of no ranks, not an error.
StatusOr<AnalysisWindow> choose_window(const profiler::TraceReader& reader,
                                       const WindowOptions& options);

}  // namespace partrain::analyzers
