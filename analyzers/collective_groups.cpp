// for_each_collective_group: the (comm_id, seq) stream behind the collective analyses.
#include "analyzers/collective_groups.h"

#include <charconv>

namespace partrain::analyzers {
namespace {

// Communicator ids that name at least one collective. The probe per interned string uses the
// (comm_id, seq) index, so this costs one lookup per string rather than a scan of the ops.
constexpr std::string_view kCommIdsSql =
    "SELECT s.value FROM string s WHERE EXISTS "
    "(SELECT 1 FROM collective co WHERE co.comm_id = s.id) ORDER BY s.value";

// One communicator's ops in sequence order: the view's comm_id = ? becomes an index search on
// the string's value, then on collective (comm_id, seq), so SQLite sorts nothing.
constexpr std::string_view kGroupsSql =
    "SELECT rank, seq, op, bytes, peer, ts_ns, dur_ns, gpu_start_ns, gpu_end_ns, group_size, "
    "group_ranks, state FROM collectives WHERE comm_id = ? ORDER BY seq";

bool row_in_window(const AnalysisWindow& window, int rank, int64_t ts_ns) {
  auto span = window.spans.find(rank);
  return span != window.spans.end() && ts_ns >= span->second.start_ns &&
         ts_ns <= span->second.end_ns;
}

CollectiveRow read_row(const profiler::SqliteStatement& stmt, const AnalysisWindow& window) {
  CollectiveRow row;
  row.rank = static_cast<int>(stmt.column_int(0));
  row.op = stmt.column_text(2);
  row.bytes = stmt.column_int(3);
  if (!stmt.column_is_null(4)) row.peer = static_cast<int>(stmt.column_int(4));
  row.ts_ns = stmt.column_int(5);
  row.time_ns = stmt.column_int(6);
  if (!stmt.column_is_null(7) && !stmt.column_is_null(8)) {
    row.time_ns = stmt.column_int(8) - stmt.column_int(7);
  }
  row.group_size = stmt.column_is_null(9) ? 0 : static_cast<int>(stmt.column_int(9));
  row.group_ranks = stmt.column_is_null(10) ? std::string() : stmt.column_text(10);
  row.completed = stmt.column_text(11) == "completed";
  row.in_window = row_in_window(window, row.rank, row.ts_ns);
  return row;
}

Status stream_comm(const profiler::SqliteDb& db, const AnalysisWindow& window,
                   const std::string& comm_id, const GroupVisitor& visitor) {
  ASSIGN_OR_RETURN(profiler::SqliteStatement stmt,
                   profiler::SqliteStatement::prepare(db, kGroupsSql));
  stmt.bind(1, std::string_view(comm_id));
  CollectiveGroup group;
  group.comm_id = comm_id;
  auto flush = [&] {
    if (!group.rows.empty() && visitor.on_group) visitor.on_group(group);
    group.rows.clear();
  };
  int rc = SQLITE_ROW;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    const int64_t seq = stmt.column_int(1);
    if (!group.rows.empty() && seq != group.seq) flush();
    group.seq = seq;
    group.rows.push_back(read_row(stmt, window));
  }
  if (rc != SQLITE_DONE) {
    return failed("reading the collectives of communicator {}: {}", comm_id, db.error_message());
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
  std::vector<std::string> comm_ids;  // a handful; read first so one statement is open at a time
  int rc = SQLITE_ROW;
  while ((rc = comms.step()) == SQLITE_ROW) comm_ids.push_back(comms.column_text(0));
  if (rc != SQLITE_DONE) return failed("listing communicators: {}", db.error_message());
  for (const std::string& comm_id : comm_ids) {
    RETURN_IF_ERROR(stream_comm(db, window, comm_id, visitor));
  }
  return Status::ok();
}

StatusOr<bool> run_has_ended(const profiler::SqliteDb& db) {
  ASSIGN_OR_RETURN(profiler::SqliteStatement stmt,
                   profiler::SqliteStatement::prepare(db, "SELECT status FROM runs"));
  if (stmt.step() != SQLITE_ROW) return true;  // no run row: nothing is still writing
  return stmt.column_text(0) != "running";
}

}  // namespace partrain::analyzers
