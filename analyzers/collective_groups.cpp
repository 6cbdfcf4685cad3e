// for_each_collective_group: the (comm_id, seq) stream behind the collective analyses.
#include "analyzers/collective_groups.h"

#include <charconv>
#include <optional>
#include <unordered_map>

#include "profiler/trace_open.h"

namespace partrain::analyzers {
namespace {

// Communicator ids that name at least one collective. The probe per interned string uses the
// (comm_id, seq) index, so this costs one lookup per string rather than a scan of the ops.
constexpr std::string_view kCommIdsSql =
    "SELECT s.id, s.value FROM string s WHERE EXISTS "
    "(SELECT 1 FROM collective co WHERE co.comm_id = s.id) ORDER BY s.value";

// One communicator's ops in sequence order, from the raw tables: an index search on collective
// (comm_id, seq), so SQLite sorts nothing. The op and group-rank strings stay interned ids here
// (StringCache resolves each once): joining the `collectives` view's five string lookups per row
// tripled the time of a 10^7-event analysis. The rank comes from the slice's track through
// TrackRanks, not a join: one b-tree search less per row. Columns as the view's
// (docs/trace-format.md).
constexpr std::string_view kGroupsSql =
    "SELECT sl.track_id, co.seq, co.op, co.bytes, coalesce(co.peer, co.root), sl.ts_ns, "
    "sl.dur_ns, co.gpu_start_ns, co.gpu_end_ns, co.group_size, co.group_ranks_id, co.state "
    "FROM collective co JOIN slice sl ON sl.id = co.slice_id "
    "WHERE co.comm_id = ?1 ORDER BY co.seq";

constexpr int64_t kCompletedState = 2;  // collective.state: 0 enqueued, 1 started, 2 completed

// The trace's interned strings this analysis meets (ops, group rank lists): a few dozen. The
// references it hands out stay valid while it lives (unordered_map nodes do not move).
class StringCache {
 public:
  explicit StringCache(const profiler::SqliteDb& db) : db_(db) {}
  const std::string& get(int64_t id) {
    auto found = values_.find(id);
    if (found != values_.end()) return found->second;
    std::string value;
    auto stmt = profiler::SqliteStatement::prepare(db_, "SELECT value FROM string WHERE id = ?1");
    if (stmt.is_ok()) {
      stmt->bind(1, id);
      if (stmt->step() == SQLITE_ROW) value = stmt->column_text(0);
    }
    return values_.emplace(id, std::move(value)).first->second;
  }

 private:
  const profiler::SqliteDb& db_;
  std::unordered_map<int64_t, std::string> values_;
};

// World rank of each track (one row per rank and stream or communicator: tens to thousands).
class TrackRanks {
 public:
  static StatusOr<TrackRanks> read(const profiler::SqliteDb& db) {
    ASSIGN_OR_RETURN(profiler::SqliteStatement stmt,
                     profiler::SqliteStatement::prepare(db, "SELECT id, rank FROM track"));
    TrackRanks tracks;
    int rc = SQLITE_ROW;
    while ((rc = stmt.step()) == SQLITE_ROW) {
      tracks.ranks_.emplace(stmt.column_int(0), static_cast<int>(stmt.column_int(1)));
    }
    if (rc != SQLITE_DONE) return profiler::trace_read_error(db, "listing tracks");
    return tracks;
  }
  // nullopt for a slice without its track row, which the view's join would leave out.
  std::optional<int> rank(int64_t track_id) const {
    auto found = ranks_.find(track_id);
    if (found == ranks_.end()) return std::nullopt;
    return found->second;
  }

 private:
  std::unordered_map<int64_t, int> ranks_;
};

bool row_in_window(const AnalysisWindow& window, int rank, int64_t ts_ns) {
  auto span = window.spans.find(rank);
  return span != window.spans.end() && ts_ns >= span->second.start_ns &&
         ts_ns <= span->second.end_ns;
}

CollectiveRow read_row(const profiler::SqliteStatement& stmt, const AnalysisWindow& window,
                       int rank, StringCache& strings) {
  CollectiveRow row;
  row.rank = rank;
  row.op = strings.get(stmt.column_int(2));
  row.bytes = stmt.column_int(3);
  if (!stmt.column_is_null(4)) row.peer = static_cast<int>(stmt.column_int(4));
  row.ts_ns = stmt.column_int(5);
  row.time_ns = stmt.column_int(6);
  if (!stmt.column_is_null(7) && !stmt.column_is_null(8)) {
    row.time_ns = stmt.column_int(8) - stmt.column_int(7);
  }
  row.group_size = stmt.column_is_null(9) ? 0 : static_cast<int>(stmt.column_int(9));
  if (!stmt.column_is_null(10)) row.group_ranks = strings.get(stmt.column_int(10));
  row.completed = stmt.column_int(11) == kCompletedState;
  row.in_window = row_in_window(window, row.rank, row.ts_ns);
  return row;
}

Status stream_comm(const profiler::SqliteDb& db, const AnalysisWindow& window,
                   int64_t comm_string_id, const std::string& comm_id, const TrackRanks& tracks,
                   StringCache& strings, const GroupVisitor& visitor) {
  ASSIGN_OR_RETURN(profiler::SqliteStatement stmt,
                   profiler::SqliteStatement::prepare(db, kGroupsSql));
  stmt.bind(1, comm_string_id);
  CollectiveGroup group;
  group.comm_id = comm_id;
  auto flush = [&] {
    if (!group.rows.empty() && visitor.on_group) visitor.on_group(group);
    group.rows.clear();
  };
  int rc = SQLITE_ROW;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    const std::optional<int> rank = tracks.rank(stmt.column_int(0));
    if (!rank) continue;
    const int64_t seq = stmt.column_int(1);
    if (!group.rows.empty() && seq != group.seq) flush();
    group.seq = seq;
    group.rows.push_back(read_row(stmt, window, *rank, strings));
  }
  if (rc != SQLITE_DONE) {
    return profiler::trace_read_error(
        db, fmt::format("reading the collectives of communicator {}", comm_id));
  }
  flush();
  if (visitor.on_comm_end) visitor.on_comm_end(comm_id);
  return Status::ok();
}

}  // namespace

bool CollectiveGroup::in_window() const {
  for (const CollectiveRow& row : rows) {
    if (row.in_window) return true;
  }
  return false;
}

bool is_p2p(std::string_view op) { return op == "send" || op == "recv"; }

std::vector<int> parse_rank_list(std::string_view text) {
  std::vector<int> ranks;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    int value = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec == std::errc() && end == item.data() + item.size()) ranks.push_back(value);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return ranks;
}

Status for_each_collective_group(const profiler::SqliteDb& db, const AnalysisWindow& window,
                                 const GroupVisitor& visitor) {
  ASSIGN_OR_RETURN(profiler::SqliteStatement comms,
                   profiler::SqliteStatement::prepare(db, kCommIdsSql));
  // A handful of (string id, comm_id); read first so one statement is open at a time.
  std::vector<std::pair<int64_t, std::string>> comm_ids;
  int rc = SQLITE_ROW;
  while ((rc = comms.step()) == SQLITE_ROW) {
    comm_ids.emplace_back(comms.column_int(0), comms.column_text(1));
  }
  if (rc != SQLITE_DONE) return profiler::trace_read_error(db, "listing communicators");
  ASSIGN_OR_RETURN(const TrackRanks tracks, TrackRanks::read(db));
  StringCache strings(db);
  for (const auto& [id, comm_id] : comm_ids) {
    RETURN_IF_ERROR(stream_comm(db, window, id, comm_id, tracks, strings, visitor));
  }
  return Status::ok();
}

GroupVisitor visit_all(std::vector<GroupVisitor> visitors) {
  GroupVisitor all;
  all.on_group = [visitors](const CollectiveGroup& group) {
    for (const GroupVisitor& v : visitors) {
      if (v.on_group) v.on_group(group);
    }
  };
  all.on_comm_end = [visitors](const std::string& comm_id) {
    for (const GroupVisitor& v : visitors) {
      if (v.on_comm_end) v.on_comm_end(comm_id);
    }
  };
  return all;
}

StatusOr<bool> run_has_ended(const profiler::SqliteDb& db) {
  ASSIGN_OR_RETURN(profiler::SqliteStatement stmt,
                   profiler::SqliteStatement::prepare(db, "SELECT status FROM runs"));
  if (stmt.step() != SQLITE_ROW) return true;  // no run row: nothing is still writing
  return stmt.column_text(0) != "running";
}

}  // namespace partrain::analyzers
