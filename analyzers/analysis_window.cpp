// choose_window: which ranks and steps an analysis covers, and where those steps lie on each
// rank's timeline. Reads the public views `runs`, `ranks`, `tracks`, `steps`, `slices` and
// `memory_events` (docs/trace-format.md); never more than one row per rank or step in memory.
#include "analyzers/analysis_window.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>

#include "profiler/chrome_export.h"
#include "profiler/trace_open.h"

namespace partrain::analyzers {
namespace {

using profiler::SqliteDb;
using profiler::SqliteStatement;

Status read_run(const SqliteDb& db, AnalysisWindow& window) {
  ASSIGN_OR_RETURN(auto stmt, SqliteStatement::prepare(db, "SELECT run_id, world_size FROM runs"));
  if (stmt.step() == SQLITE_ROW) {
    window.run_id = stmt.column_text(0);
    window.world_size = static_cast<int>(stmt.column_int(1));
  }
  return Status::ok();
}

// Ranks with a `ranks` row, and ranks that recorded slices or steps without one.
StatusOr<std::vector<int>> trace_ranks(const SqliteDb& db) {
  ASSIGN_OR_RETURN(auto stmt, SqliteStatement::prepare(
                                  db, "SELECT rank FROM ranks UNION SELECT rank FROM tracks "
                                      "UNION SELECT rank FROM steps ORDER BY 1"));
  std::vector<int> ranks;
  while (stmt.step() == SQLITE_ROW) ranks.push_back(static_cast<int>(stmt.column_int(0)));
  return ranks;
}

StatusOr<std::vector<int>> select_ranks(const std::vector<int>& present,
                                        const std::vector<int>& wanted) {
  if (present.empty()) return invalid_argument("the trace has no ranks: nothing to analyse");
  if (wanted.empty()) return present;
  std::vector<int> chosen = wanted;
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  for (int rank : chosen) {
    if (!std::binary_search(present.begin(), present.end(), rank)) {
      return invalid_argument("--rank {}: the trace has ranks {}", rank,
                              profiler::format_rank_ranges(present));
    }
  }
  return chosen;
}

StatusOr<std::vector<int64_t>> recorded_steps(const SqliteDb& db) {
  ASSIGN_OR_RETURN(auto stmt,
                   SqliteStatement::prepare(db, "SELECT DISTINCT step FROM steps ORDER BY step"));
  std::vector<int64_t> steps;
  while (stmt.step() == SQLITE_ROW) steps.push_back(stmt.column_int(0));
  return steps;
}

// Fills first_step/last_step/skipped_steps from an explicit selection or by skipping warm-up.
Status select_steps(const std::vector<int64_t>& recorded, const WindowOptions& options,
                    AnalysisWindow& window) {
  const int64_t lowest = recorded.front(), highest = recorded.back();
  if (options.steps) {
    const int64_t first = options.steps->first.value_or(lowest);
    const int64_t last = options.steps->last.value_or(highest);
    auto inside = std::lower_bound(recorded.begin(), recorded.end(), first);
    if (first > last || inside == recorded.end() || *inside > last) {
      return invalid_argument("--steps {}:{}: the trace has steps {}..{} ({} steps)", first, last,
                              lowest, highest, recorded.size());
    }
    window.first_step = *inside;
    window.last_step = *(std::upper_bound(recorded.begin(), recorded.end(), last) - 1);
    window.steps_selected = true;
    return Status::ok();
  }
  if (options.skip_steps < 0) {
    return invalid_argument("--skip-steps {}: give a number of warm-up steps, 0 or more",
                            options.skip_steps);
  }
  const int skip = options.skip_is_default && recorded.size() == 1 ? 0 : options.skip_steps;
  if (static_cast<size_t>(skip) >= recorded.size()) {
    return invalid_argument(
        "--skip-steps {} leaves none of the {} steps ({}..{}): skip fewer (--skip-steps 0 keeps "
        "them all) or record more steps",
        options.skip_steps, recorded.size(), lowest, highest);
  }
  window.first_step = recorded[static_cast<size_t>(skip)];
  window.last_step = highest;
  window.skipped_steps = skip;
  window.warm_up_only = skip < options.skip_steps;
  return Status::ok();
}

StatusOr<RankSpan> step_span(const SqliteDb& db, int rank, int64_t first, int64_t last) {
  ASSIGN_OR_RETURN(auto stmt,
                   SqliteStatement::prepare(db, "SELECT MIN(ts_ns), MAX(ts_ns + dur_ns), COUNT(*) "
                                                "FROM steps WHERE rank = ?1 AND step BETWEEN ?2 "
                                                "AND ?3"));
  stmt.bind(1, int64_t{rank});
  stmt.bind(2, first);
  stmt.bind(3, last);
  RankSpan span;
  if (stmt.step() == SQLITE_ROW && stmt.column_int(2) > 0) {
    span = {stmt.column_int(0), stmt.column_int(1), stmt.column_int(2)};
  }
  return span;
}

// An explicit --steps window in which none of the selected ranks recorded a step: refused (an
// empty report would read as a clean one), naming the steps they did record.
Status check_selected_ranks_have_steps(const SqliteDb& db, const AnalysisWindow& window) {
  if (std::any_of(window.spans.begin(), window.spans.end(),
                  [](const auto& entry) { return entry.second.steps > 0; })) {
    return Status::ok();
  }
  // The error's detail only: what each selected rank did record.
  int64_t lowest = std::numeric_limits<int64_t>::max(),
          highest = std::numeric_limits<int64_t>::min();
  for (const auto& [rank, span] : window.spans) {
    ASSIGN_OR_RETURN(auto stmt, SqliteStatement::prepare(
                                    db, "SELECT MIN(step), MAX(step) FROM steps WHERE rank = ?1"));
    stmt.bind(1, int64_t{rank});
    if (stmt.step() == SQLITE_ROW && !stmt.column_is_null(0)) {
      lowest = std::min(lowest, stmt.column_int(0));
      highest = std::max(highest, stmt.column_int(1));
    }
  }
  const std::string recorded = lowest <= highest
                                   ? fmt::format("they recorded steps {}..{}", lowest, highest)
                                   : std::string("they recorded no steps at all");
  return invalid_argument(
      "--steps {}:{}: rank(s) {} recorded no step in it ({}); choose steps "
      "they recorded, or other ranks with --rank",
      window.first_step, window.last_step, fmt::join(window.ranks, ","), recorded);
}

// First to last event of a rank without steps: slices (collectives are slices) and memory samples.
StatusOr<RankSpan> event_span(const SqliteDb& db, int rank) {
  ASSIGN_OR_RETURN(auto stmt, SqliteStatement::prepare(
                                  db, "SELECT MIN(lo), MAX(hi) FROM ("
                                      " SELECT MIN(ts_ns) AS lo, MAX(ts_ns + dur_ns) AS hi "
                                      " FROM slices WHERE rank = ?1 UNION ALL"
                                      " SELECT MIN(ts_ns), MAX(ts_ns) FROM memory_events "
                                      " WHERE rank = ?1)"));
  stmt.bind(1, int64_t{rank});
  RankSpan span;
  const int rc = stmt.step();
  if (rc != SQLITE_ROW) {
    return profiler::trace_read_error(db, fmt::format("reading the events of rank {}", rank));
  }
  if (!stmt.column_is_null(0)) {
    span.start_ns = stmt.column_int(0);
    span.end_ns = stmt.column_int(1);
  }
  return span;
}

// A rank with nothing in the window (it died early, or records no steps) gets the window of the
// others, so its time reads as idle rather than vanishing.
void fill_empty_spans(AnalysisWindow& window) {
  int64_t start = std::numeric_limits<int64_t>::max(), end = std::numeric_limits<int64_t>::min();
  for (const auto& [rank, span] : window.spans) {
    if (span.duration_ns() <= 0 && span.steps == 0) continue;
    start = std::min(start, span.start_ns);
    end = std::max(end, span.end_ns);
  }
  if (start > end) start = end = 0;
  for (auto& [rank, span] : window.spans) {
    if (span.duration_ns() <= 0 && span.steps == 0) span = {start, end, 0};
  }
  window.start_ns = start;
  window.end_ns = end;
}

}  // namespace

StatusOr<AnalysisWindow> choose_window(const profiler::SqliteDb& db,
                                       const WindowOptions& options) {
  AnalysisWindow window;
  RETURN_IF_ERROR(read_run(db, window));
  ASSIGN_OR_RETURN(const std::vector<int> present, trace_ranks(db));
  // A traced program that did not say (no WORLD_SIZE): the ranks it recorded, as export says.
  if (window.world_size <= 0) window.world_size = static_cast<int>(present.size());
  ASSIGN_OR_RETURN(window.ranks, select_ranks(present, options.ranks));
  ASSIGN_OR_RETURN(const std::vector<int64_t> steps, recorded_steps(db));
  window.has_steps = !steps.empty();
  if (window.has_steps) RETURN_IF_ERROR(select_steps(steps, options, window));
  if (!window.has_steps && options.steps) {
    return invalid_argument("--steps: the trace records no steps (a job partrain did not "
                            "launch); leave --steps out to analyse the whole run");
  }
  for (int rank : window.ranks) {
    if (window.has_steps) {
      ASSIGN_OR_RETURN(window.spans[rank],
                       step_span(db, rank, window.first_step, window.last_step));
    } else {
      ASSIGN_OR_RETURN(window.spans[rank], event_span(db, rank));
    }
  }
  if (window.steps_selected) RETURN_IF_ERROR(check_selected_ranks_have_steps(db, window));
  fill_empty_spans(window);
  return window;
}

}  // namespace partrain::analyzers
