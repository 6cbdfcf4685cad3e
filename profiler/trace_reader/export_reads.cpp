#include "profiler/trace_reader/export_reads.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <span>

namespace partrain::profiler {
namespace {

// Every query binds the selection as ?1..?5: ?1 the ranks as a JSON array (NULL: all), ?2..?3
// the steps, ?4..?5 the steps' time window (NULL when not by step).
void bind_selection(SqliteStatement& stmt, const ExportSelection& selection) {
  if (selection.ranks.empty()) {
    stmt.bind_null(1);
  } else {
    stmt.bind(1, std::string_view(fmt::format("[{}]", fmt::join(selection.ranks, ","))));
  }
  if (!selection.by_step) {
    for (int i = 2; i <= 5; ++i) stmt.bind_null(i);
    return;
  }
  stmt.bind(2, selection.first_step);
  stmt.bind(3, selection.last_step);
  stmt.bind(4, selection.window_start);
  stmt.bind(5, selection.window_end);
  stmt.bind(6, selection.earlier_attempts_end);
}

StatusOr<SqliteStatement> prepare_selected(const TraceReader& reader, std::string_view sql,
                                           const ExportSelection& selection) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, reader.prepare(sql));
  bind_selection(stmt, selection);
  return stmt;
}

// Written only when ranks are selected: `?1 IS NULL OR rank IN (...)` kept SQLite from using the
// track's rank and the slice_track_ts index, so each rank of `export --per-rank` scanned every
// slice of the trace (15 min for 1,024 ranks of 320 slices each).
std::string rank_filter(std::string_view alias, const ExportSelection& selection) {
  if (selection.ranks.empty()) return "1";
  return fmt::format("{0}.rank IN (SELECT value FROM json_each(?1))", alias);
}

// A row of `slices` (alias) is kept when its rank is selected and its step is (in the last
// attempt of a restarted job: from the earlier attempts' end on), or, having no step, when it
// overlaps the selected steps' time window.
std::string slice_filter(std::string_view alias, const ExportSelection& selection) {
  return rank_filter(alias, selection) +
         fmt::format(
             " AND (?2 IS NULL OR ({0}.step BETWEEN ?2 AND ?3 AND {0}.ts_ns >= ?6) OR "
             "({0}.step IS NULL AND {0}.ts_ns <= ?5 AND {0}.ts_ns + {0}.dur_ns >= ?4))",
             alias);
}

struct ArgColumn {
  std::string_view name;
  bool text;
  std::string_view arg = {};  // the name in the export when it is not the column's (Kineto's)
  std::string_view arg_name() const { return arg.empty() ? name : arg; }
};

// clang-format off
constexpr ArgColumn kCollectiveArgs[] = {
    {"comm_id", true},     {"seq", false},        {"op", true},           {"dtype", true},
    {"count", false},      {"bytes", false},      {"peer", false},        {"reduce_op", true},
    {"root", false},       {"comm_rank", false},  {"group_size", false},  {"group_ranks", true},
    {"state", true},       {"enqueue_ns", false}, {"gpu_start_ns", false}, {"gpu_end_ns", false}};
constexpr ArgColumn kKernelArgs[] = {
    {"correlation_id", false, "correlation"}, {"device", false},  {"stream", false},
    {"grid_x", false},         {"grid_y", false},  {"grid_z", false},  {"block_x", false},
    {"block_y", false},        {"block_z", false}, {"registers", false},
    {"static_shared_bytes", false}, {"dynamic_shared_bytes", false}};
constexpr ArgColumn kTransferArgs[] = {
    {"bytes", false}, {"correlation_id", false, "correlation"}, {"device", false},
    {"stream", false}};
// clang-format on

std::span<const ArgColumn> detail_columns(SliceDetail detail) {
  switch (detail) {
    case SliceDetail::kNone: return {};
    case SliceDetail::kCollective: return kCollectiveArgs;
    case SliceDetail::kKernel: return kKernelArgs;
    case SliceDetail::kTransfer: return kTransferArgs;
  }
  return {};
}

// Columns 0..9 of every slice query; the detail table's columns follow.
constexpr std::string_view kSliceColumns =
    "s.rank, s.track_kind, s.track, s.ts_ns, s.dur_ns, s.name, s.category, s.step, "
    "s.micro_batch, s.layer";
constexpr int kSliceArgsColumn = 10;

std::string detail_column_list(std::string_view alias, std::span<const ArgColumn> columns) {
  std::string list;
  for (const ArgColumn& c : columns) list += fmt::format(", {}.{}", alias, c.name);
  return list;
}

// One query per kind, so each joins its detail view with an inner join SQLite can flatten.
std::string slices_sql(const TraceReader& reader, SliceDetail detail,
                       const ExportSelection& selection) {
  const std::string where = slice_filter("s", selection);
  switch (detail) {
    case SliceDetail::kNone:
      return fmt::format(
          "SELECT {} FROM slices s WHERE NOT EXISTS (SELECT 1 FROM collectives c WHERE "
          "c.slice_id = s.slice_id) AND NOT EXISTS (SELECT 1 FROM kernels k WHERE k.slice_id = "
          "s.slice_id) {}AND {}",
          kSliceColumns,
          has_transfer_table(reader)
              ? "AND NOT EXISTS (SELECT 1 FROM transfer x WHERE x.slice_id = s.slice_id) "
              : "",
          where);
    case SliceDetail::kCollective:
      return fmt::format(
          "SELECT {}{} FROM collectives c JOIN slices s ON s.slice_id = c.slice_id WHERE {}",
          kSliceColumns, detail_column_list("c", kCollectiveArgs), where);
    case SliceDetail::kKernel:
      return fmt::format(
          "SELECT {}{} FROM kernels k JOIN slices s ON s.slice_id = k.slice_id WHERE {}",
          kSliceColumns, detail_column_list("k", kKernelArgs), where);
    case SliceDetail::kTransfer:
      return fmt::format(
          "SELECT {}{} FROM transfers x JOIN slices s ON s.slice_id = x.slice_id WHERE {}",
          kSliceColumns, detail_column_list("x", kTransferArgs), where);
  }
  return {};
}

constexpr std::string_view kFlowColumns =
    "{0}.rank, {0}.track_kind, {0}.track, {0}.ts_ns, {0}.dur_ns";

void read_flow_slice(const SqliteStatement& row, int first, FlowSlice& slice) {
  slice.rank = static_cast<int>(row.column_int(first));
  slice.track_kind = row.column_text(first + 1);
  slice.track = row.column_text(first + 2);
  slice.ts_ns = row.column_int(first + 3);
  slice.dur_ns = row.column_int(first + 4);
}

}  // namespace

StatusOr<std::optional<EventSpan>> selected_steps_window(const TraceReader& reader,
                                                         const ExportSelection& selection) {
  ASSIGN_OR_RETURN(
      SqliteStatement stmt,
      prepare_selected(reader,
                       "SELECT min(ts_ns), max(ts_ns + dur_ns) FROM steps WHERE " +
                           analysed_steps(reader) + " AND " + rank_filter("steps", selection) +
                           " AND step BETWEEN ?2 AND ?3",
                       selection));
  if (stmt.step() != SQLITE_ROW) return reader.read_error("reading the steps from the trace");
  if (stmt.column_is_null(0)) return std::optional<EventSpan>();
  return std::optional(EventSpan{stmt.column_int(0), stmt.column_int(1)});
}

StatusOr<std::optional<std::pair<int64_t, int64_t>>> selected_step_numbers(
    const TraceReader& reader, const ExportSelection& selection) {
  ASSIGN_OR_RETURN(
      SqliteStatement stmt,
      prepare_selected(reader,
                       "SELECT min(step), max(step) FROM steps WHERE " + analysed_steps(reader) +
                           " AND " + rank_filter("steps", selection),
                       selection));
  if (stmt.step() != SQLITE_ROW) return reader.read_error("reading the steps from the trace");
  if (stmt.column_is_null(0)) return std::optional<std::pair<int64_t, int64_t>>();
  return std::optional(std::pair{stmt.column_int(0), stmt.column_int(1)});
}

StatusOr<std::vector<ExportTrack>> export_tracks(const TraceReader& reader,
                                                 const ExportSelection& selection) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare_selected(reader,
                                    "SELECT rank, kind, name FROM tracks WHERE kind <> 'counter' "
                                    "AND " +
                                        rank_filter("tracks", selection) +
                                        " ORDER BY rank, CASE kind WHEN 'cpu_thread' THEN 0 WHEN "
                                        "'cuda_stream' THEN 1 WHEN 'comm' THEN 2 ELSE 3 END, name",
                                    selection));
  std::vector<ExportTrack> tracks;
  RETURN_IF_ERROR(reader.each_row(
      stmt, "reading the tracks from the trace", [&](const SqliteStatement& row) {
        tracks.push_back({static_cast<int>(row.column_int(0)), row.column_text(1),
                          row.column_text(2)});
      }));
  return tracks;
}

bool ExportSliceCursor::next(ExportSlice& slice) {
  if (!step()) return false;
  slice.rank = static_cast<int>(stmt_.column_int(0));
  slice.track_kind = stmt_.column_text(1);
  slice.track = stmt_.column_text(2);
  slice.ts_ns = stmt_.column_int(3);
  slice.dur_ns = stmt_.column_int(4);
  slice.name = stmt_.column_text(5);
  slice.category = stmt_.column_text(6);
  std::optional<int64_t>* coordinates[] = {&slice.step, &slice.micro_batch, &slice.layer};
  for (int i = 0; i < 3; ++i) {
    *coordinates[i] = stmt_.column_is_null(7 + i) ? std::nullopt
                                                  : std::optional(stmt_.column_int(7 + i));
  }
  const std::span<const ArgColumn> columns = detail_columns(detail_);
  size_t used = 0;
  for (size_t i = 0; i < columns.size(); ++i) {
    const int column = kSliceArgsColumn + static_cast<int>(i);
    if (stmt_.column_is_null(column)) continue;
    if (slice.args.size() <= used) slice.args.emplace_back();
    ExportArg& arg = slice.args[used++];
    arg.name = columns[i].arg_name();
    arg.text = columns[i].text;
    if (arg.text) {
      arg.value = stmt_.column_text(column);
    } else {
      arg.number = stmt_.column_int(column);
    }
  }
  slice.args.resize(used);
  return true;
}

bool has_transfer_table(const TraceReader& reader) {
  return reader.db().has_table("main", "transfer");
}

StatusOr<ExportSliceCursor> export_slices(const TraceReader& reader,
                                          const ExportSelection& selection, SliceDetail detail) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare_selected(reader, slices_sql(reader, detail, selection), selection));
  return ExportSliceCursor(reader.db(), std::move(stmt), detail);
}

bool ExportMemoryCursor::next(ExportMemorySample& sample) {
  if (!step()) return false;
  sample.rank = static_cast<int>(stmt_.column_int(0));
  sample.ts_ns = stmt_.column_int(1);
  sample.category = stmt_.column_text(2);
  sample.bytes = stmt_.column_int(3);
  return true;
}

StatusOr<std::vector<std::string>> memory_category_names(const TraceReader& reader) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT name FROM memory_category ORDER BY id"));
  std::vector<std::string> names;
  RETURN_IF_ERROR(reader.each_row(stmt, "reading the memory categories",
                                  [&](const SqliteStatement& row) {
                                    names.push_back(row.column_text(0));
                                  }));
  return names;
}

StatusOr<std::optional<int64_t>> memory_bytes_at(const TraceReader& reader, int rank,
                                                 std::string_view category, int64_t ts_ns) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT bytes FROM memory_events WHERE rank = ?1 AND "
                                  "category = ?2 AND ts_ns <= ?3 ORDER BY ts_ns DESC LIMIT 1"));
  stmt.bind(1, int64_t{rank});
  stmt.bind(2, category);
  stmt.bind(3, ts_ns);
  const int rc = stmt.step();
  if (rc == SQLITE_DONE) return std::optional<int64_t>();
  if (rc != SQLITE_ROW) return reader.read_error("reading the memory samples from the trace");
  return std::optional(stmt.column_int(0));
}

StatusOr<ExportMemoryCursor> export_memory(const TraceReader& reader,
                                           const ExportSelection& selection) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare_selected(reader,
                                    "SELECT m.rank, m.ts_ns, m.category, m.bytes FROM "
                                    "memory_events m WHERE " +
                                        rank_filter("m", selection) +
                                        " AND (?2 IS NULL OR (m.ts_ns > ?4 AND m.ts_ns <= ?5))",
                                    selection));
  return ExportMemoryCursor(reader.db(), std::move(stmt),
                            "reading the memory samples from the trace");
}

bool ExportCounterCursor::next(ExportCounterSample& sample) {
  if (!step()) return false;
  sample.rank = static_cast<int>(stmt_.column_int(0));
  sample.ts_ns = stmt_.column_int(1);
  sample.name = stmt_.column_text(2);
  sample.value = stmt_.column_double(3);
  return true;
}

bool has_counter_table(const TraceReader& reader) {
  return reader.db().has_table("main", "counter");
}

StatusOr<ExportCounterCursor> export_counters(const TraceReader& reader,
                                              const ExportSelection& selection) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare_selected(reader,
                                    "SELECT c.rank, c.ts_ns, c.name, c.value FROM counters c "
                                    "WHERE " +
                                        rank_filter("c", selection) +
                                        " AND (?2 IS NULL OR (c.ts_ns >= ?4 AND c.ts_ns <= ?5)) "
                                        "ORDER BY c.rank, c.name, c.ts_ns",
                                    selection));
  return ExportCounterCursor(reader.db(), std::move(stmt),
                             "reading the counter samples from the trace");
}

bool SendRecvCursor::next(FlowSlice& send, FlowSlice& recv) {
  if (!step()) return false;
  read_flow_slice(stmt_, 0, send);
  read_flow_slice(stmt_, 5, recv);
  return true;
}

StatusOr<SendRecvCursor> export_send_recv_pairs(const TraceReader& reader,
                                                const ExportSelection& selection) {
  const std::string sql = fmt::format(
      "SELECT {}, {} FROM collectives a JOIN slices sa ON sa.slice_id = a.slice_id "
      "JOIN collectives b ON b.comm_id = a.comm_id AND b.seq = a.seq AND b.rank = a.peer AND "
      "b.peer = a.rank AND b.op = 'recv' JOIN slices sb ON sb.slice_id = b.slice_id "
      "WHERE a.op = 'send' AND {} AND {}",
      fmt::format(kFlowColumns, "sa"), fmt::format(kFlowColumns, "sb"),
      slice_filter("sa", selection), slice_filter("sb", selection));
  ASSIGN_OR_RETURN(SqliteStatement stmt, prepare_selected(reader, sql, selection));
  return SendRecvCursor(reader.db(), std::move(stmt),
                        "reading the send/recv pairs from the trace");
}

bool CollectiveMemberCursor::next(CollectiveMember& member) {
  if (!step()) return false;
  member.comm_id = stmt_.column_text(0);
  member.seq = stmt_.column_int(1);
  member.op = stmt_.column_text(2);
  read_flow_slice(stmt_, 3, member.slice);
  return true;
}

StatusOr<CollectiveMemberCursor> export_collective_members(const TraceReader& reader,
                                                           const ExportSelection& selection) {
  const std::string sql = fmt::format(
      "SELECT c.comm_id, c.seq, c.op, {} FROM collectives c JOIN slices s ON s.slice_id = "
      "c.slice_id WHERE c.op NOT IN ('send', 'recv') AND {} ORDER BY c.comm_id, c.seq, s.ts_ns, "
      "s.rank",
      fmt::format(kFlowColumns, "s"), slice_filter("s", selection));
  ASSIGN_OR_RETURN(SqliteStatement stmt, prepare_selected(reader, sql, selection));
  return CollectiveMemberCursor(reader.db(), std::move(stmt),
                                "reading the collectives from the trace");
}

}  // namespace partrain::profiler
