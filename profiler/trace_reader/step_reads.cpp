#include "profiler/trace_reader/step_reads.h"

#include <fmt/format.h>

#include "profiler/trace_reader/damaged_rows.h"

namespace partrain::profiler {

constexpr const char* kStepColumns = "SELECT rank, step, ts_ns, dur_ns, loss, tokens FROM step ";

bool stores_step_attempts(const TraceReader& reader) {
  return reader.db().has_column("main", "step", "attempt");
}

std::string last_attempt_steps(const TraceReader& reader) {
  // The key leads with the attempt: MAX(attempt) is one seek, evaluated once per statement.
  return stores_step_attempts(reader) ? "attempt = (SELECT MAX(attempt) FROM step)" : "1";
}

std::string analysed_steps(const TraceReader& reader) {
  return last_attempt_steps(reader) + " AND " + std::string(kUsableStepDuration);
}

bool StepCursor::next(StepRow& row) {
  if (!step()) return false;
  row.rank = static_cast<int>(stmt_.column_int(0));
  row.step = stmt_.column_int(1);
  row.ts_ns = stmt_.column_int(2);
  row.dur_ns = stmt_.column_int(3);
  row.loss = stmt_.column_is_null(4) ? std::nullopt : std::optional(stmt_.column_double(4));
  row.tokens = stmt_.column_is_null(5) ? std::nullopt : std::optional(stmt_.column_int(5));
  return true;
}

StatusOr<std::vector<int64_t>> recorded_steps(const TraceReader& reader) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, reader.prepare("SELECT DISTINCT step FROM step WHERE " +
                                                        analysed_steps(reader) + " ORDER BY step"));
  std::vector<int64_t> steps;
  RETURN_IF_ERROR(reader.each_row(stmt, "listing the steps", [&](const SqliteStatement& row) {
    steps.push_back(row.column_int(0));
  }));
  return steps;
}

StatusOr<StepSpan> step_span(const TraceReader& reader, int rank, int64_t first, int64_t last) {
  ASSIGN_OR_RETURN(
      SqliteStatement stmt,
      reader.prepare("SELECT MIN(ts_ns), MAX(ts_ns + dur_ns), COUNT(*) FROM step "
                     "WHERE " +
                     analysed_steps(reader) + " AND rank = ?1 AND step BETWEEN ?2 AND ?3"));
  stmt.bind(1, int64_t{rank});
  stmt.bind(2, first);
  stmt.bind(3, last);
  const int rc = stmt.step();
  if (rc != SQLITE_ROW) {
    return reader.read_error(fmt::format("reading the steps of rank {}", rank));
  }
  if (stmt.column_int(2) == 0) return StepSpan{};
  return StepSpan{stmt.column_int(0), stmt.column_int(1), stmt.column_int(2)};
}

StatusOr<std::optional<std::pair<int64_t, int64_t>>> step_numbers(const TraceReader& reader,
                                                                   int rank) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT MIN(step), MAX(step) FROM step WHERE " +
                                  analysed_steps(reader) + " AND rank = ?1"));
  stmt.bind(1, int64_t{rank});
  if (stmt.step() != SQLITE_ROW) {
    return reader.read_error(fmt::format("reading the steps of rank {}", rank));
  }
  if (stmt.column_is_null(0)) return std::optional<std::pair<int64_t, int64_t>>();
  return std::optional(std::pair{stmt.column_int(0), stmt.column_int(1)});
}

StatusOr<std::vector<EarlierSteps>> earlier_steps(const TraceReader& reader) {
  std::vector<EarlierSteps> earlier;
  if (!reader.db().has_table("main", "earlier_step")) return earlier;
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT rank, COUNT(*), MIN(step), MAX(step) FROM earlier_step "
                                  "GROUP BY rank ORDER BY rank"));
  RETURN_IF_ERROR(
      reader.each_row(stmt, "reading the replaced steps", [&](const SqliteStatement& row) {
        earlier.push_back({static_cast<int>(row.column_int(0)), row.column_int(1),
                           row.column_int(2), row.column_int(3)});
      }));
  return earlier;
}

StatusOr<std::vector<StepAttempt>> step_attempts(const TraceReader& reader) {
  std::vector<StepAttempt> attempts;
  if (!stores_step_attempts(reader)) return attempts;
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT attempt, MIN(step), MAX(step), COUNT(*) FROM step "
                                  "GROUP BY attempt ORDER BY attempt"));
  RETURN_IF_ERROR(
      reader.each_row(stmt, "reading the steps' attempts", [&](const SqliteStatement& row) {
        attempts.push_back({static_cast<int>(row.column_int(0)), row.column_int(1),
                            row.column_int(2), row.column_int(3)});
      }));
  return attempts;
}

StatusOr<std::optional<int64_t>> earlier_attempts_end(const TraceReader& reader) {
  if (!stores_step_attempts(reader)) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT MAX(ts_ns + dur_ns) FROM step WHERE attempt < "
                                  "(SELECT MAX(attempt) FROM step)"));
  if (stmt.step() != SQLITE_ROW) return reader.read_error("reading the steps from the trace");
  if (stmt.column_is_null(0)) return std::optional<int64_t>();
  return std::optional(stmt.column_int(0));
}

StatusOr<std::optional<EventSpan>> event_span(const TraceReader& reader, int rank) {
  // The slice index (track_id, ts_ns) per track of the rank, and the memory (rank, ts_ns) index.
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT MIN(lo), MAX(hi) FROM ("
                                  " SELECT MIN(ts_ns) AS lo, MAX(ts_ns + dur_ns) AS hi "
                                  " FROM slices WHERE rank = ?1 UNION ALL"
                                  " SELECT MIN(ts_ns), MAX(ts_ns) FROM memory_events "
                                  " WHERE rank = ?1)"));
  stmt.bind(1, int64_t{rank});
  if (stmt.step() != SQLITE_ROW) {
    return reader.read_error(fmt::format("reading the events of rank {}", rank));
  }
  if (stmt.column_is_null(0)) return std::optional<EventSpan>();
  return std::optional(EventSpan{stmt.column_int(0), stmt.column_int(1)});
}

StatusOr<StepCursor> rank_steps(const TraceReader& reader, int rank, int64_t first,
                                int64_t last) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare(std::string(kStepColumns) + "WHERE " + analysed_steps(reader) +
                                  " AND rank = ?1 AND step BETWEEN ?2 AND ?3 ORDER BY step"));
  stmt.bind(1, int64_t{rank});
  stmt.bind(2, first);
  stmt.bind(3, last);
  return StepCursor(reader.db(), std::move(stmt), fmt::format("reading the steps of rank {}", rank));
}

StatusOr<StepCursor> window_steps(const TraceReader& reader, int64_t first, int64_t last) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare(std::string(kStepColumns) + "WHERE " + analysed_steps(reader) +
                                  " AND step BETWEEN ?1 AND ?2"));
  stmt.bind(1, first);
  stmt.bind(2, last);
  return StepCursor(reader.db(), std::move(stmt), "reading the steps");
}

}  // namespace partrain::profiler
