// Reading the steps table: which steps a trace recorded, where a rank's steps lie on the
// timeline, and cursors over the step rows (the step table's (rank, step) key orders them).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/status.h"
#include "profiler/trace_reader/row_cursor.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::profiler {

struct StepRow {
  int rank = 0;
  int64_t step = 0;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  std::optional<double> loss;
  std::optional<int64_t> tokens;
};

// Inclusive step numbers; steps of every number when `all` is set (a trace without steps is one
// window: its rows with no step too, where a query has those).
struct StepFilter {
  int64_t first = 0;
  int64_t last = 0;
  bool all = false;
};

// Earliest start to latest end of some steps of one rank, and how many there are.
struct StepSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int64_t steps = 0;
};

// First to last event of one rank (slices and memory samples).
struct EventSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// The step rows of one rank that later rows of the same numbers replaced in the steps table (the
// earlier_step table: a restarted worker ran those numbers again).
struct EarlierSteps {
  int rank = 0;
  int64_t rows = 0;
  int64_t first_step = 0;
  int64_t last_step = 0;
};

class StepCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  bool next(StepRow& row);
};

// The step numbers any rank recorded, ascending.
StatusOr<std::vector<int64_t>> recorded_steps(const TraceReader& reader);
// The steps first..last of `rank` (steps 0 when it has none there).
StatusOr<StepSpan> step_span(const TraceReader& reader, int rank, int64_t first, int64_t last);
// The lowest and highest step `rank` recorded; nullopt for none.
StatusOr<std::optional<std::pair<int64_t, int64_t>>> step_numbers(const TraceReader& reader,
                                                                   int rank);
// nullopt for a rank that recorded no slice and no memory sample.
StatusOr<std::optional<EventSpan>> event_span(const TraceReader& reader, int rank);
// Per rank, by rank; none for a trace older than schema version 6 (it kept no replaced row).
StatusOr<std::vector<EarlierSteps>> earlier_steps(const TraceReader& reader);
// The steps first..last of `rank`, by step.
StatusOr<StepCursor> rank_steps(const TraceReader& reader, int rank, int64_t first, int64_t last);
// The steps first..last of every rank, in no particular order.
StatusOr<StepCursor> window_steps(const TraceReader& reader, int64_t first, int64_t last);

}  // namespace partrain::profiler
