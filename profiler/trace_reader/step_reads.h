// Reading the steps table: which steps a trace recorded, where a rank's steps lie on the
// timeline, and cursors over the step rows. A job torchrun restarted numbers each attempt's steps
// from 0 again; every read here but step_attempts is of the last attempt's steps (the
// `step.attempt` column, since schema version 7; an older file's steps are one attempt's), and
// of the rows whose duration is usable (a step of zero or negative length is damage).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
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
  // A restarted job's rows of those numbers before it are an earlier attempt's
  // (earlier_attempts_end); the lowest int64 when there is none.
  int64_t from_ns = std::numeric_limits<int64_t>::min();
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

// The step rows of one rank that later rows of the same numbers (and attempt, since version 7)
// replaced in the steps table (the earlier_step table: the job's step counter started again; in
// an older file, also a restarted worker running those numbers again).
struct EarlierSteps {
  int rank = 0;
  int64_t rows = 0;
  int64_t first_step = 0;
  int64_t last_step = 0;
};

// The steps one torchrun attempt recorded (`step.attempt`: the restarts before it).
struct StepAttempt {
  int attempt = 0;
  int64_t first_step = 0;
  int64_t last_step = 0;
  int64_t rows = 0;  // step rows, every rank's
};

class StepCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  bool next(StepRow& row);
};

// Whether the file stores each step's attempt (`step.attempt`, since schema version 7).
bool stores_step_attempts(const TraceReader& reader);
// The SQL condition on a row of `step` (or the `steps` view) that keeps the last attempt's:
// "attempt = (SELECT MAX(attempt) FROM step)", or "1" for a file older than version 7.
std::string last_attempt_steps(const TraceReader& reader);
// The step rows every read below hands out: the last attempt's whose duration is usable
// (damaged_rows.h kUsableStepDuration; damaged_rows() counts the others as data loss).
std::string analysed_steps(const TraceReader& reader);
// Per attempt, ascending; none for a file older than version 7 (it stored no attempt).
StatusOr<std::vector<StepAttempt>> step_attempts(const TraceReader& reader);
// The latest end of a step of an attempt before the last: a slice of the last attempt's step
// numbers that starts before it is an earlier attempt's (slices carry no attempt). nullopt when
// the job was not restarted or the file stores no attempts (older than schema version 7).
StatusOr<std::optional<int64_t>> earlier_attempts_end(const TraceReader& reader);
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
// The steps first..last of `rank`, by step (the last attempt's, as below).
StatusOr<StepCursor> rank_steps(const TraceReader& reader, int rank, int64_t first, int64_t last);
// The steps first..last of every rank, in no particular order.
StatusOr<StepCursor> window_steps(const TraceReader& reader, int64_t first, int64_t last);

}  // namespace partrain::profiler
