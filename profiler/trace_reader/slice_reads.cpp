#include "profiler/trace_reader/slice_reads.h"

#include <fmt/format.h>

#include "profiler/trace_open.h"
#include "profiler/trace_reader/trace_codes.h"

namespace partrain::profiler {
namespace {

// One track's slices that touch [?2, ?3), by start, from the raw table: the slice_track_ts index
// gives the order, and the `slices` view's four joins per row (track, kind, two strings) would
// cost more than the sweep that reads them.
constexpr const char* kTrackSlicesSql =
    "SELECT ts_ns, ts_ns + dur_ns, category, name_id FROM slice "
    "WHERE track_id = ?1 AND ts_ns < ?3 AND ts_ns + dur_ns > ?2 ORDER BY ts_ns";

// The name of the phase slice a traced process's injection library writes for its whole life
// (docs/tracing.md). A lifetime is not a phase of the rank's work: counted as one, a foreign
// program's every idle moment looked like work "recorded only as a phase".
constexpr const char* kProcessLifetimeSliceSql = "SELECT id FROM string WHERE value = 'process'";

// Steps `stmt` to its next slice of `categories` into `head`; SQLite's last result code.
int advance(SqliteStatement& stmt, SliceCategorySet categories, int64_t lifetime_name,
            SliceSpan& head) {
  int rc = SQLITE_ROW;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    const std::optional<SliceCategory> category = slice_category_from_code(stmt.column_int(2));
    if (!category || !categories.contains(*category)) continue;
    if (*category == SliceCategory::kPhase && stmt.column_int(3) == lifetime_name) continue;
    head = {stmt.column_int(0), stmt.column_int(1), *category, stmt.column_int(3)};
    return rc;
  }
  return rc;
}

// The string id of the lifetime slice's name, or -1 when the trace has none.
StatusOr<int64_t> process_lifetime_name(const TraceReader& reader) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, reader.prepare(kProcessLifetimeSliceSql));
  const int rc = stmt.step();
  if (rc == SQLITE_ROW) return stmt.column_int(0);
  if (rc != SQLITE_DONE) return reader.read_error("reading the string table");
  return int64_t{-1};
}

}  // namespace

bool RankSliceCursor::next(SliceSpan& slice) {
  if (tracks_.empty()) return false;
  size_t first = 0;
  for (size_t i = 1; i < tracks_.size(); ++i) {
    if (tracks_[i].head.start_ns < tracks_[first].head.start_ns) first = i;
  }
  slice = tracks_[first].head;
  const int rc =
      advance(tracks_[first].stmt, categories_, lifetime_name_, tracks_[first].head);
  if (rc != SQLITE_ROW) {
    if (rc != SQLITE_DONE) {
      status_ = trace_read_error(*db_, fmt::format("reading the slices of rank {}", rank_));
      tracks_.clear();
      return false;
    }
    tracks_.erase(tracks_.begin() + static_cast<std::ptrdiff_t>(first));
  }
  return true;
}

StatusOr<RankSliceCursor> rank_slices(const TraceReader& reader, int rank, int64_t from,
                                      int64_t to, SliceCategorySet categories,
                                      std::optional<TrackKind> only) {
  ASSIGN_OR_RETURN(const std::vector<TrackRow> tracks, reader.tracks_of_rank(rank));
  ASSIGN_OR_RETURN(const int64_t lifetime_name, process_lifetime_name(reader));
  std::vector<RankSliceCursor::Track> heads;
  for (const TrackRow& track : tracks) {
    if (!track.kind || *track.kind == TrackKind::kMemory) continue;
    if (only && *track.kind != *only) continue;
    RankSliceCursor::Track head;
    ASSIGN_OR_RETURN(head.stmt, reader.prepare(kTrackSlicesSql));
    head.stmt.bind(1, track.id);
    head.stmt.bind(2, from);
    head.stmt.bind(3, to);
    const int rc = advance(head.stmt, categories, lifetime_name, head.head);
    if (rc == SQLITE_ROW) {
      heads.push_back(std::move(head));
    } else if (rc != SQLITE_DONE) {
      return reader.read_error(fmt::format("reading the slices of rank {}", rank));
    }
  }
  return RankSliceCursor(reader.db(), rank, std::move(heads), categories, lifetime_name);
}

void PipelineActionCursor::over(int64_t from, int64_t to) {
  rewind();
  stmt_.bind(2, from);
  stmt_.bind(3, to);
}

bool PipelineActionCursor::next(PipelineAction& action) {
  if (!step()) return false;
  action.start_ns = stmt_.column_int(0);
  action.end_ns = stmt_.column_int(1);
  action.forward = stmt_.column_text(2) == "forward";
  action.weight = stmt_.column_text(2) == "weight";
  action.micro_batch = stmt_.column_is_null(3) ? -1 : static_cast<int>(stmt_.column_int(3));
  return true;
}

StatusOr<PipelineActionCursor> pipeline_actions(const TraceReader& reader, int rank) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT ts_ns, ts_ns + dur_ns, name, micro_batch FROM slices "
                                  "WHERE rank = ?1 AND category = 'phase' "
                                  "AND name IN ('forward', 'backward', 'weight') AND ts_ns >= ?2 "
                                  "AND ts_ns < ?3 ORDER BY ts_ns"));
  stmt.bind(1, int64_t{rank});
  return PipelineActionCursor(reader.db(), std::move(stmt),
                              fmt::format("reading the phases of rank {}", rank));
}

StatusOr<std::map<int, int64_t>> compute_time_by_rank(const TraceReader& reader,
                                                      std::string_view name, StepFilter steps) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT rank, SUM(dur_ns) FROM slices WHERE category = "
                                  "'compute' AND name = ?4 AND ((step BETWEEN ?1 AND ?2 AND "
                                  "ts_ns >= ?5) OR ?3) GROUP BY rank"));
  stmt.bind(1, steps.first);
  stmt.bind(2, steps.last);
  stmt.bind(3, int64_t{steps.all ? 1 : 0});
  stmt.bind(4, name);
  stmt.bind(5, steps.from_ns);
  std::map<int, int64_t> by_rank;
  RETURN_IF_ERROR(reader.each_row(stmt, fmt::format("reading the {} slices", name),
                                  [&](const SqliteStatement& row) {
                                    by_rank[static_cast<int>(row.column_int(0))] = row.column_int(1);
                                  }));
  return by_rank;
}

}  // namespace partrain::profiler
