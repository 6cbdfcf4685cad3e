#include "profiler/trace_reader/collective_reads.h"

#include <fmt/format.h>

#include <algorithm>

#include "profiler/trace_reader/damaged_rows.h"
#include "profiler/trace_reader/trace_codes.h"

namespace partrain::profiler {

namespace {

// A collective `c` joined to its slice `s`, as read_collective_op reads them. Values that cannot
// be true read as not recorded (damaged_rows.h): a backwards GPU span, a negative size (NULL:
// the row's size is unknown), a group larger than the world.
std::string collective_op_columns() {
  return fmt::format(
      "s.track_id, c.seq, c.op, CASE WHEN {0} THEN NULL ELSE c.bytes END, "
      "coalesce(c.peer, c.root), s.ts_ns, s.dur_ns, CASE WHEN {1} THEN NULL ELSE c.gpu_start_ns "
      "END, CASE WHEN {1} THEN NULL ELSE c.gpu_end_ns END, CASE WHEN {2} THEN 0 ELSE "
      "c.group_size END, c.group_ranks_id, c.state, s.name_id, s.step, c.dtype",
      kUnusableBytes, kReversedGpuSpan, kUnusableGroupSize);
}

// The interned string `id` through the reader's cache; false with `error` set on a failed read.
bool text_of(const TraceReader& reader, int64_t id, std::string_view& out, Status& error) {
  if (const std::string* cached = reader.cached_string(id)) {
    out = *cached;
    return true;
  }
  StatusOr<std::string_view> text = reader.string(id);
  if (!text.is_ok()) {
    error = text.status();
    return false;
  }
  out = *text;
  return true;
}

// Fills `op` from the row (the comm_id aside: the communicator's cursor knows it); false for an
// op without its track, or with `error` set on a failed lookup. No StatusOr per row: the
// collective pass reads every op of the run.
bool read_collective_op(const TraceReader& reader, const SqliteStatement& row, CollectiveOp& op,
                        Status& error) {
  // The rank comes from the slice's track through the reader's map, not a join: one b-tree
  // search less per row; the op and group strings through its cache (a few dozen strings,
  // where joining them per row tripled the time of a 10^7-event analysis).
  const int64_t track_id = row.column_int(0);
  const TrackRow* track = reader.cached_track(track_id);
  if (track == nullptr) {
    StatusOr<const TrackRow*> found = reader.track(track_id);
    if (!found.is_ok()) error = found.status();
    if (!found.is_ok() || *found == nullptr) return false;
    track = *found;
  }
  op.rank = track->rank;
  op.seq = row.column_int(1);
  if (!text_of(reader, row.column_int(2), op.op, error)) return false;
  op.bytes = row.column_int(3);
  const bool size_lost = row.column_is_null(3);
  op.peer = row.column_is_null(4) ? std::nullopt
                                  : std::optional(static_cast<int>(row.column_int(4)));
  op.ts_ns = row.column_int(5);
  op.dur_ns = row.column_int(6);
  op.gpu_start_ns = row.column_is_null(7) ? std::nullopt : std::optional(row.column_int(7));
  op.gpu_end_ns = row.column_is_null(8) ? std::nullopt : std::optional(row.column_int(8));
  op.group_size = static_cast<int>(row.column_int(9));  // NULL reads as 0
  op.group_ranks = {};
  if (!row.column_is_null(10) && !text_of(reader, row.column_int(10), op.group_ranks, error)) {
    return false;
  }
  if (!readable_group_ranks(op.group_ranks)) op.group_ranks = {};
  op.state = collective_state_from_code(row.column_int(11));
  // The slice is named for the op's label when its caller gave one (else for the op).
  op.label = {};
  if (row.column_int(12) != row.column_int(2) &&
      !text_of(reader, row.column_int(12), op.label, error)) {
    return false;
  }
  op.step = row.column_is_null(13) ? std::nullopt : std::optional(row.column_int(13));
  if (!text_of(reader, row.column_int(14), op.dtype, error)) return false;
  if (size_lost) op.dtype = "other";  // as a source that did not know it: no size, no bandwidth
  return true;
}

}  // namespace

bool CommunicatorOpCursor::next(CollectiveOp& op) {
  Status error;
  while (step()) {
    if (!read_collective_op(*reader_, stmt_, op, error)) {
      if (!error.is_ok()) return fail(std::move(error));
      continue;  // an op without its track
    }
    op.comm_id = comm_id_;
    return true;
  }
  return false;
}

StatusOr<std::vector<Communicator>> communicators(const TraceReader& reader) {
  // The probe per interned string uses the (comm_id, seq) index: one lookup per string rather
  // than a scan of the ops.
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT s.id, s.value FROM string s WHERE EXISTS "
                                  "(SELECT 1 FROM collective co WHERE co.comm_id = s.id) "
                                  "ORDER BY s.value"));
  std::vector<Communicator> comms;
  RETURN_IF_ERROR(reader.each_row(stmt, "listing communicators", [&](const SqliteStatement& row) {
    comms.push_back({row.column_int(0), row.column_text(1)});
  }));
  return comms;
}

StatusOr<CommunicatorOpCursor> communicator_ops(const TraceReader& reader,
                                                const Communicator& comm) {
  // An index search on collective (comm_id, seq): SQLite sorts nothing.
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare(fmt::format("SELECT {} FROM collective c JOIN slice s ON "
                                              "s.id = c.slice_id WHERE c.comm_id = ?1 ORDER BY "
                                              "c.seq",
                                              collective_op_columns())));
  stmt.bind(1, comm.string_id);
  return CommunicatorOpCursor(
      reader, std::move(stmt),
      fmt::format("reading the collectives of communicator {}", comm.comm_id), comm.comm_id);
}

StatusOr<bool> has_collectives(const TraceReader& reader) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, reader.prepare("SELECT 1 FROM collective LIMIT 1"));
  const int rc = stmt.step();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return reader.read_error("reading the collectives");
  return rc == SQLITE_ROW;
}

StatusOr<std::vector<CollectiveOp>> unfinished_collectives(const TraceReader& reader) {
  ASSIGN_OR_RETURN(
      SqliteStatement stmt,
      reader.prepare(fmt::format("SELECT {}, c.comm_id FROM collective c JOIN slice s ON s.id = "
                                 "c.slice_id WHERE c.state != ?1 ORDER BY s.ts_ns",
                                 kCollectiveOpColumns)));
  stmt.bind(1, static_cast<int64_t>(CollectiveState::kCompleted));
  std::vector<CollectiveOp> ops;
  Status error;
  RETURN_IF_ERROR(
      reader.each_row(stmt, "reading the unfinished collectives", [&](const SqliteStatement& row) {
        CollectiveOp op;
        if (!error.is_ok() || !read_collective_op(reader, row, op, error)) return;
        if (text_of(reader, row.column_int(15), op.comm_id, error)) ops.push_back(op);
      }));
  RETURN_IF_ERROR(error);
  std::stable_sort(ops.begin(), ops.end(),
                   [](const CollectiveOp& a, const CollectiveOp& b) { return a.rank < b.rank; });
  return ops;
}

StatusOr<std::optional<int64_t>> last_collective_end_ns(const TraceReader& reader, int rank) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT MAX(s.ts_ns + s.dur_ns) FROM collective c JOIN slice s "
                                  "ON s.id = c.slice_id JOIN track t ON t.id = s.track_id WHERE "
                                  "t.rank = ?1"));
  stmt.bind(1, int64_t{rank});
  if (stmt.step() != SQLITE_ROW) {
    return reader.read_error(fmt::format("reading the last collective of rank {}", rank));
  }
  if (stmt.column_is_null(0)) return std::optional<int64_t>();
  return std::optional(stmt.column_int(0));
}

StatusOr<std::vector<int>> ranks_that_recorded(const TraceReader& reader, std::string_view comm_id,
                                               int64_t seq) {
  // The (comm_id, seq) index finds the op's rows; their tracks name the ranks.
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT DISTINCT t.rank FROM collective c JOIN slice s ON s.id "
                                  "= c.slice_id JOIN track t ON t.id = s.track_id WHERE "
                                  "c.comm_id = (SELECT id FROM string WHERE value = ?1) AND "
                                  "c.seq = ?2 ORDER BY t.rank"));
  stmt.bind(1, comm_id);
  stmt.bind(2, seq);
  std::vector<int> ranks;
  RETURN_IF_ERROR(reader.each_row(
      stmt, fmt::format("reading who recorded seq {} of communicator {}", seq, comm_id),
      [&](const SqliteStatement& row) { ranks.push_back(static_cast<int>(row.column_int(0))); }));
  return ranks;
}

}  // namespace partrain::profiler
