#include "profiler/trace_reader/trace_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "profiler/trace_open.h"
#include "profiler/trace_reader/damaged_rows.h"
#include "profiler/trace_reader/trace_codes.h"

namespace partrain::profiler {
namespace {

std::optional<int64_t> optional_int(const SqliteStatement& row, int column) {
  if (row.column_is_null(column)) return std::nullopt;
  return row.column_int(column);
}

// A count, rank or code no int holds (a damaged or hostile file) reads as absent, not as the
// int its low bits make (4294967298 ranks read as 2).
std::optional<int> optional_int32(const SqliteStatement& row, int column) {
  if (row.column_is_null(column)) return std::nullopt;
  const int64_t value = row.column_int(column);
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  return static_cast<int>(value);
}

}  // namespace

StatusOr<SqliteStatement> TraceReader::prepare(std::string_view sql) const {
  return SqliteStatement::prepare(*db_, sql);
}

Status TraceReader::read_error(std::string_view what) const {
  return trace_read_error(*db_, what);
}

StatusOr<std::optional<RunRow>> TraceReader::run() const {
  ASSIGN_OR_RETURN(
      SqliteStatement stmt,
      prepare("SELECT run_id, command, config, status, world_size, start_ns, "
              "end_ns, failing_rank, "
              "CASE WHEN json_valid(config) THEN json_extract(config, '$.backend') END, "
              "CASE WHEN json_valid(config) THEN "
              "json_extract(config, '$.nproc_per_node') END, "
              "CASE WHEN json_valid(config) THEN "
              "json_extract(config, '$.imported_from') END "
              "FROM run ORDER BY id LIMIT 1"));
  const int rc = stmt.step();
  if (rc == SQLITE_DONE) return std::optional<RunRow>();
  if (rc != SQLITE_ROW) return read_error("reading the run");
  RunRow run;
  run.run_id = stmt.column_text(0);
  run.command = stmt.column_text(1);
  run.config = stmt.column_text(2);
  run.status = run_status_from_name(stmt.column_text(3));
  run.world_size = optional_int32(stmt, 4);
  run.start_ns = optional_int(stmt, 5);
  run.end_ns = optional_int(stmt, 6);
  run.failing_rank = optional_int32(stmt, 7);
  run.backend = stmt.column_text(8);
  run.nproc_per_node = optional_int32(stmt, 9);
  run.imported_from = stmt.column_text(10);
  return std::optional<RunRow>(std::move(run));
}

StatusOr<std::vector<RankRow>> TraceReader::ranks() const {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare("SELECT rank, host, device, exit_code, exit_signal, node FROM rank "
                           "ORDER BY rank"));
  std::vector<RankRow> ranks;
  RETURN_IF_ERROR(each_row(stmt, "reading the ranks", [&](const SqliteStatement& row) {
    ranks.push_back({static_cast<int>(row.column_int(0)), row.column_text(1), row.column_text(2),
                     optional_int32(row, 3), optional_int32(row, 4), optional_int32(row, 5)});
  }));
  return ranks;
}

StatusOr<std::vector<int>> TraceReader::recorded_ranks() const {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare("SELECT rank FROM rank UNION SELECT rank FROM track "
                           "UNION SELECT rank FROM step ORDER BY 1"));
  std::vector<int> ranks;
  RETURN_IF_ERROR(each_row(stmt, "listing the ranks", [&](const SqliteStatement& row) {
    ranks.push_back(static_cast<int>(row.column_int(0)));
  }));
  return ranks;
}

Status TraceReader::read_tracks_after(int64_t id) const {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare("SELECT t.id, t.rank, t.kind, s.value, t.name_id FROM track t "
                           "LEFT JOIN string s ON s.id = t.name_id WHERE t.id > ?1 ORDER BY t.id"));
  stmt.bind(1, id);
  return each_row(stmt, "listing the tracks", [this](const SqliteStatement& row) {
    // A track whose name the string table lost keeps its events (damaged_rows counts the loss).
    TrackRow track{
        row.column_int(0), static_cast<int>(row.column_int(1)),
        track_kind_from_code(row.column_int(2)),
        row.column_is_null(3) ? lost_string_text(row.column_int(4)) : row.column_text(3)};
    last_track_id_ = std::max(last_track_id_, track.id);
    std::vector<int64_t>& ids = rank_track_ids_[track.rank];
    if (ids.empty() || ids.back() < track.id) ids.push_back(track.id);  // read in id order
    tracks_.insert_or_assign(track.id, std::move(track));
  });
}

StatusOr<std::vector<TrackRow>> TraceReader::tracks_of_rank(int rank) const {
  RETURN_IF_ERROR(read_tracks_after(last_track_id_));
  std::vector<TrackRow> tracks;
  auto ids = rank_track_ids_.find(rank);
  if (ids == rank_track_ids_.end()) return tracks;
  tracks.reserve(ids->second.size());
  for (int64_t id : ids->second) tracks.push_back(tracks_.at(id));
  return tracks;
}

StatusOr<std::vector<TrackRow>> TraceReader::tracks() const {
  RETURN_IF_ERROR(read_tracks_after(last_track_id_));
  std::vector<TrackRow> tracks;
  tracks.reserve(tracks_.size());
  for (const auto& [id, track] : tracks_) tracks.push_back(track);
  std::sort(tracks.begin(), tracks.end(),
            [](const TrackRow& a, const TrackRow& b) { return a.id < b.id; });
  return tracks;
}

StatusOr<const TrackRow*> TraceReader::track(int64_t id) const {
  auto found = tracks_.find(id);
  if (found == tracks_.end() && id > last_track_id_) {
    RETURN_IF_ERROR(read_tracks_after(last_track_id_));  // a track created since
    found = tracks_.find(id);
    // Tracks are written before their slices: one still missing is not coming, and is not
    // looked for again.
    if (found == tracks_.end()) last_track_id_ = id;
  }
  return found == tracks_.end() ? nullptr : &found->second;
}

StatusOr<std::string_view> TraceReader::string(int64_t id) const {
  if (auto found = strings_.find(id); found != strings_.end()) return std::string_view(found->second);
  if (!string_stmt_) {
    ASSIGN_OR_RETURN(SqliteStatement stmt, prepare("SELECT value FROM string WHERE id = ?1"));
    string_stmt_ = std::move(stmt);
  }
  string_stmt_->bind(1, id);
  const int rc = string_stmt_->step();
  std::string value = rc == SQLITE_ROW ? string_stmt_->column_text(0) : lost_string_text(id);
  string_stmt_->reset();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return read_error("reading the strings");
  return std::string_view(strings_.emplace(id, std::move(value)).first->second);
}

StatusOr<std::vector<StatRow>> TraceReader::stats() const {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare("SELECT name, rank, value, severity, description FROM stat "
                           "ORDER BY name, rank"));
  std::vector<StatRow> stats;
  RETURN_IF_ERROR(each_row(stmt, "reading the stats", [&](const SqliteStatement& row) {
    StatRow stat;
    stat.name = row.column_text(0);
    if (const int64_t rank = row.column_int(1); rank >= 0) stat.rank = static_cast<int>(rank);
    stat.value = row.column_int(2);
    stat.severity = stat_severity_from_name(row.column_text(3));
    stat.description = row.column_text(4);
    stats.push_back(std::move(stat));
  }));
  return stats;
}

StatusOr<bool> TraceReader::is_merge() const {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare("SELECT count(*) FROM meta WHERE key = 'merged_from'"));
  if (stmt.step() != SQLITE_ROW) return read_error("reading the trace's meta");
  return stmt.column_int(0) > 0;
}

StatusOr<int64_t> TraceReader::event_count() const {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare("SELECT (SELECT count(*) FROM slice) + (SELECT count(*) FROM memory) "
                           "+ (SELECT count(*) FROM step)"));
  if (stmt.step() != SQLITE_ROW) return read_error("counting the events");
  return stmt.column_int(0);
}

}  // namespace partrain::profiler
