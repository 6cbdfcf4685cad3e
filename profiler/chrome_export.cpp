// Chrome Trace Event Format writer over the trace store's public views (chrome_export.h). Each
// part of the document is one streaming query: process and thread names, slices, memory
// counters, sampled counters (NVML), then flow arrows (send -> recv, and collectives from their first member).
#include "profiler/chrome_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>

#include "profiler/json_text.h"
#include "profiler/trace_open.h"

namespace partrain::profiler {
namespace {

// The optional "args" object of an event: opened by its first argument.
class Args {
 public:
  explicit Args(fmt::memory_buffer& out) : out_(out) {}
  void add(std::string_view key, int64_t value) {
    start(key);
    fmt::format_to(std::back_inserter(out_), "{}", value);
  }
  void add(std::string_view key, std::string_view value) {
    start(key);
    append_json_string(out_, value);
  }
  void add(std::string_view key, double value) {  // finite: NaN and inf are not JSON
    start(key);
    fmt::format_to(std::back_inserter(out_), "{}", std::isfinite(value) ? value : 0.0);
  }
  void close() {
    if (open_) out_.push_back('}');
  }

 private:
  void start(std::string_view key) {
    append_json_raw(out_, open_ ? "," : ",\"args\":{");
    open_ = true;
    append_json_string(out_, key);
    out_.push_back(':');
  }
  fmt::memory_buffer& out_;
  bool open_ = false;
};

// Rank r is process r + 1: Perfetto gives pid 0 (the kernel's swapper) special handling and its
// maintainers ask synthesised traces to start at 1.
void open_event(fmt::memory_buffer& out, char phase, int rank) {
  fmt::format_to(std::back_inserter(out), "{{\"ph\":\"{}\",\"pid\":{}", phase, rank + 1);
}

// ---- what is exported ----------------------------------------------------------------------

struct RankRow {
  int rank = 0;
  std::string host;
  std::string device;
};

struct RunRow {
  std::string run_id, command, status, backend;
  std::optional<int64_t> world_size;
};

// The rows an export keeps, as the bound parameters ?1..?5 of every query:
// ?1 ranks as a JSON array (NULL: all), ?2..?3 steps, ?4..?5 the steps' time window.
struct Selection {
  std::string ranks_json;
  bool by_step = false;
  int64_t first_step = 0, last_step = 0, window_start = 0, window_end = 0;
};

void bind_selection(SqliteStatement& stmt, const Selection& selection) {
  if (selection.ranks_json.empty()) {
    stmt.bind_null(1);
  } else {
    stmt.bind(1, std::string_view(selection.ranks_json));
  }
  if (!selection.by_step) {
    for (int i = 2; i <= 5; ++i) stmt.bind_null(i);
    return;
  }
  stmt.bind(2, selection.first_step);
  stmt.bind(3, selection.last_step);
  stmt.bind(4, selection.window_start);
  stmt.bind(5, selection.window_end);
}

constexpr std::string_view kRankFilter =
    "(?1 IS NULL OR {0}.rank IN (SELECT value FROM json_each(?1)))";

// A row of `slices` (alias) is kept when its rank is selected and its step is, or, having no
// step, when it overlaps the selected steps' time window.
std::string slice_filter(std::string_view alias) {
  return fmt::format(kRankFilter, alias) +
         fmt::format(
             " AND (?2 IS NULL OR {0}.step BETWEEN ?2 AND ?3 OR ({0}.step IS NULL AND "
             "{0}.ts_ns <= ?5 AND {0}.ts_ns + {0}.dur_ns >= ?4))",
             alias);
}

// A damaged page met while reading is exit 3, as open_trace would have said (it checks large
// files' event pages only as they are read).
Status read_error(const SqliteDb& db, std::string_view what) {
  return trace_read_error(db, fmt::format("reading {} from the trace", what));
}

StatusOr<SqliteStatement> prepare(const SqliteDb& db, std::string_view sql,
                                  const Selection* selection = nullptr) {
  auto stmt = SqliteStatement::prepare(db, sql);
  if (stmt.is_ok() && selection != nullptr) bind_selection(*stmt, *selection);
  return stmt;
}

std::string optional_text(const SqliteStatement& row, int column) {
  return row.column_is_null(column) ? std::string() : row.column_text(column);
}

// Ranks named by `ranks` or owning a track or a step (a rank that only sampled memory, with no
// rank row, is not listed).
StatusOr<std::vector<RankRow>> read_ranks(const SqliteDb& db) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare(db,
                           "SELECT r.rank, k.host, k.device FROM (SELECT rank FROM ranks "
                           "UNION SELECT rank FROM tracks UNION SELECT rank FROM steps) r "
                           "LEFT JOIN ranks k ON k.rank = r.rank ORDER BY r.rank"));
  std::vector<RankRow> ranks;
  int rc = 0;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    ranks.push_back(
        {static_cast<int>(stmt.column_int(0)), optional_text(stmt, 1), optional_text(stmt, 2)});
  }
  if (rc != SQLITE_DONE) return read_error(db, "the ranks");
  return ranks;
}

StatusOr<RunRow> read_run(const SqliteDb& db, const std::vector<RankRow>& ranks) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare(db,
                           "SELECT run_id, command, status, world_size, CASE WHEN "
                           "json_valid(config) THEN json_extract(config, '$.backend') END "
                           "FROM runs LIMIT 1"));
  RunRow run;
  int rc = stmt.step();
  if (rc == SQLITE_ROW) {
    run = {optional_text(stmt, 0), optional_text(stmt, 1), optional_text(stmt, 2),
           optional_text(stmt, 4), std::nullopt};
    if (!stmt.column_is_null(3)) run.world_size = stmt.column_int(3);
  } else if (rc != SQLITE_DONE) {
    return read_error(db, "the run");
  }
  if (!run.world_size || *run.world_size <= 0) run.world_size = static_cast<int64_t>(ranks.size());
  if (run.backend.empty()) {
    // A program partrain traced (no launch config): its collectives, if any, came through the
    // NCCL interposition, and a rank on a GPU uses NCCL; otherwise the backend is not known and
    // distributedInfo leaves it out rather than guess.
    const bool cuda = std::any_of(ranks.begin(), ranks.end(),
                                  [](const RankRow& r) { return r.device.starts_with("cuda"); });
    ASSIGN_OR_RETURN(SqliteStatement any, prepare(db, "SELECT 1 FROM collective LIMIT 1"));
    const int found = any.step();
    if (found != SQLITE_ROW && found != SQLITE_DONE) return read_error(db, "the collectives");
    if (cuda || found == SQLITE_ROW) run.backend = "nccl";
  }
  return run;
}

StatusOr<std::vector<RankRow>> select_ranks(const std::vector<RankRow>& present,
                                            const std::vector<int>& wanted) {
  if (wanted.empty()) return present;
  std::vector<int> present_ranks;
  for (const RankRow& r : present) present_ranks.push_back(r.rank);
  std::vector<RankRow> chosen;
  for (int rank : wanted) {
    auto it = std::find(present_ranks.begin(), present_ranks.end(), rank);
    if (it == present_ranks.end()) {
      return invalid_argument("rank {} is not in this trace ({})", rank,
                              present.empty()
                                  ? std::string("it records no ranks")
                                  : "ranks present: " + format_rank_ranges(present_ranks));
    }
    chosen.push_back(present[static_cast<size_t>(it - present_ranks.begin())]);
  }
  return chosen;
}

std::string step_range_text(const StepRange& steps) {
  auto end = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : std::string(); };
  if (steps.first && steps.last && *steps.first == *steps.last) return end(steps.first);
  return end(steps.first) + ":" + end(steps.last);
}

// The selected steps' time window on the exported ranks (`steps`: earliest start to latest end).
Status select_steps(const SqliteDb& db, const StepRange& steps, Selection& selection) {
  selection.by_step = true;
  selection.first_step = steps.first.value_or(std::numeric_limits<int64_t>::min());
  selection.last_step = steps.last.value_or(std::numeric_limits<int64_t>::max());
  const std::string where = fmt::format(kRankFilter, "steps");
  ASSIGN_OR_RETURN(SqliteStatement window,
                   prepare(db,
                           "SELECT min(ts_ns), max(ts_ns + dur_ns) FROM steps WHERE " + where +
                               " AND step BETWEEN ?2 AND ?3",
                           &selection));
  if (window.step() != SQLITE_ROW) return read_error(db, "the steps");
  if (!window.column_is_null(0)) {
    selection.window_start = window.column_int(0);
    selection.window_end = window.column_int(1);
    return Status::ok();
  }
  ASSIGN_OR_RETURN(
      SqliteStatement recorded,
      prepare(db, "SELECT min(step), max(step) FROM steps WHERE " + where, &selection));
  if (recorded.step() != SQLITE_ROW) return read_error(db, "the steps");
  return invalid_argument(
      "steps {} match no step recorded on the exported ranks ({})", step_range_text(steps),
      recorded.column_is_null(0)
          ? std::string("they record no steps")
          : fmt::format("steps recorded: {}..{}", recorded.column_int(0), recorded.column_int(1)));
}

// ---- processes and threads -----------------------------------------------------------------

struct Track {
  int rank = 0;
  int tid = 0;
  std::string label;
};

// tid of each (rank, track kind, track name): 1, 2, ... within a rank, in display order
// (cpu threads, cuda streams, communicators, memory), so a pid never shares tid 0 with itself.
class TrackIds {
 public:
  void add(int rank, std::string_view kind, std::string_view name) {
    int tid = tracks_.empty() || tracks_.back().rank != rank ? 1 : tracks_.back().tid + 1;
    ids_.emplace(key(rank, kind, name), tid);
    tracks_.push_back({rank, tid, fmt::format("{} ({})", name, kind)});
  }
  int find(int rank, std::string_view kind, std::string_view name) const {
    auto it = ids_.find(key(rank, kind, name));
    return it == ids_.end() ? 0 : it->second;
  }
  const std::vector<Track>& tracks() const { return tracks_; }

 private:
  const std::string& key(int rank, std::string_view kind, std::string_view name) const {
    key_.clear();
    fmt::format_to(std::back_inserter(key_), "{}\x1f{}\x1f{}", rank, kind, name);
    return key_;
  }
  std::unordered_map<std::string, int> ids_;
  std::vector<Track> tracks_;
  mutable std::string key_;  // reused: one lookup per slice row
};

StatusOr<TrackIds> read_tracks(const SqliteDb& db, const Selection& selection) {
  ASSIGN_OR_RETURN(
      SqliteStatement stmt,
      prepare(db,
              "SELECT rank, kind, name FROM tracks WHERE kind <> 'counter' AND " +
                  fmt::format(kRankFilter, "tracks") +
                  " ORDER BY rank, CASE kind WHEN 'cpu_thread' THEN 0 WHEN "
                  "'cuda_stream' THEN 1 WHEN 'comm' THEN 2 ELSE 3 END, name",
              &selection));
  TrackIds tracks;
  int rc = 0;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    tracks.add(static_cast<int>(stmt.column_int(0)), stmt.column_text(1), stmt.column_text(2));
  }
  if (rc != SQLITE_DONE) return read_error(db, "the tracks");
  return tracks;
}

// An "M" event naming a process or thread ("process_name", "thread_name"), or ordering it
// ("process_sort_index", "thread_sort_index").
template <typename Value>
Status write_metadata_event(JsonStream& sink, std::string_view event, int pid, int tid,
                            std::string_view key, Value value) {
  fmt::memory_buffer& out = sink.next_element();
  open_event(out, 'M', pid);
  fmt::format_to(std::back_inserter(out), ",\"tid\":{},\"ts\":0,\"name\":\"{}\"", tid, event);
  Args args(out);
  args.add(key, value);
  args.close();
  out.push_back('}');
  return sink.end_element();
}

Status write_metadata(JsonStream& sink, const std::vector<RankRow>& ranks, const TrackIds& tracks) {
  for (const RankRow& r : ranks) {
    const std::string name = r.host.empty() ? fmt::format("rank {}", r.rank)
                                            : fmt::format("rank {} ({})", r.rank, r.host);
    RETURN_IF_ERROR(
        write_metadata_event(sink, "process_name", r.rank, 0, "name", std::string_view(name)));
    RETURN_IF_ERROR(
        write_metadata_event(sink, "process_sort_index", r.rank, 0, "sort_index", int64_t{r.rank}));
  }
  for (const Track& t : tracks.tracks()) {
    RETURN_IF_ERROR(write_metadata_event(sink, "thread_name", t.rank, t.tid, "name",
                                         std::string_view(t.label)));
    RETURN_IF_ERROR(write_metadata_event(sink, "thread_sort_index", t.rank, t.tid, "sort_index",
                                         int64_t{t.tid}));
  }
  return Status::ok();
}

// ---- slices --------------------------------------------------------------------------------

struct ArgColumn {
  std::string_view name;
  bool text;
};

// clang-format off
constexpr ArgColumn kCollectiveArgs[] = {
    {"comm_id", true},     {"seq", false},        {"op", true},           {"dtype", true},
    {"count", false},      {"bytes", false},      {"peer", false},        {"reduce_op", true},
    {"root", false},       {"comm_rank", false},  {"group_size", false},  {"group_ranks", true},
    {"state", true},       {"enqueue_ns", false}, {"gpu_start_ns", false}, {"gpu_end_ns", false}};
constexpr ArgColumn kKernelArgs[] = {
    {"correlation_id", false}, {"device", false},  {"stream", false},    {"grid_x", false},
    {"grid_y", false},         {"grid_z", false},  {"block_x", false},   {"block_y", false},
    {"block_z", false},        {"registers", false}, {"static_shared_bytes", false},
    {"dynamic_shared_bytes", false}};
constexpr ArgColumn kTransferArgs[] = {
    {"bytes", false}, {"correlation_id", false}, {"device", false}, {"stream", false}};
// clang-format on

// Columns 0..9 of every slice query; the detail table's columns follow from kSliceArgsColumn.
constexpr std::string_view kSliceColumns =
    "s.rank, s.track_kind, s.track, s.ts_ns, s.dur_ns, s.name, s.category, s.step, "
    "s.micro_batch, s.layer";
constexpr int kSliceArgsColumn = 10;

std::string detail_columns(std::string_view alias, std::span<const ArgColumn> columns) {
  std::string list;
  for (const ArgColumn& c : columns) list += fmt::format(", {}.{}", alias, c.name);
  return list;
}

void write_slice(fmt::memory_buffer& out, const SqliteStatement& row, const TrackIds& tracks,
                 std::span<const ArgColumn> details) {
  const int rank = static_cast<int>(row.column_int(0));
  open_event(out, 'X', rank);
  fmt::format_to(std::back_inserter(out),
                 ",\"tid\":{},\"ts\":", tracks.find(rank, row.column_text(1), row.column_text(2)));
  append_json_us(out, row.column_int(3));
  append_json_raw(out, ",\"dur\":");
  append_json_us(out, row.column_int(4));
  append_json_raw(out, ",\"name\":");
  append_json_string(out, row.column_text(5));
  append_json_raw(out, ",\"cat\":");
  append_json_string(out, row.column_text(6));
  Args args(out);
  constexpr std::string_view kCoordinates[] = {"step", "micro_batch", "layer"};
  for (int i = 0; i < 3; ++i) {
    if (!row.column_is_null(7 + i)) args.add(kCoordinates[i], row.column_int(7 + i));
  }
  for (size_t i = 0; i < details.size(); ++i) {
    const int column = kSliceArgsColumn + static_cast<int>(i);
    if (row.column_is_null(column)) continue;
    if (details[i].text) {
      args.add(details[i].name, std::string_view(row.column_text(column)));
    } else {
      args.add(details[i].name, row.column_int(column));
    }
  }
  args.close();
  out.push_back('}');
}

StatusOr<int64_t> write_slice_rows(const SqliteDb& db, const std::string& sql,
                                   const Selection& selection, const TrackIds& tracks,
                                   std::span<const ArgColumn> details, JsonStream& sink) {
  ASSIGN_OR_RETURN(SqliteStatement stmt, prepare(db, sql, &selection));
  int64_t written = 0;
  int rc = 0;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    write_slice(sink.next_element(), stmt, tracks, details);
    RETURN_IF_ERROR(sink.end_element());
    ++written;
  }
  if (rc != SQLITE_DONE) return read_error(db, "the slices");
  return written;
}

// One pass per kind, so each joins its detail view with an inner join SQLite can flatten: slices
// with no detail row, collectives (their args), kernels (their launch parameters) and, from
// schema version 3, GPU copies and fills (their bytes).
StatusOr<int64_t> write_slices(const SqliteDb& db, const Selection& selection,
                               const TrackIds& tracks, JsonStream& sink) {
  const std::string where = slice_filter("s");
  const bool has_transfers = db.has_table("main", "transfer");
  const std::string plain = fmt::format(
      "SELECT {} FROM slices s WHERE NOT EXISTS (SELECT 1 FROM collectives c WHERE c.slice_id = "
      "s.slice_id) AND NOT EXISTS (SELECT 1 FROM kernels k WHERE k.slice_id = s.slice_id) {}AND {}",
      kSliceColumns,
      has_transfers ? "AND NOT EXISTS (SELECT 1 FROM transfer x WHERE x.slice_id = s.slice_id) "
                    : "",
      where);
  const std::string collectives = fmt::format(
      "SELECT {}{} FROM collectives c JOIN slices s ON s.slice_id = c.slice_id WHERE {}",
      kSliceColumns, detail_columns("c", kCollectiveArgs), where);
  const std::string kernels =
      fmt::format("SELECT {}{} FROM kernels k JOIN slices s ON s.slice_id = k.slice_id WHERE {}",
                  kSliceColumns, detail_columns("k", kKernelArgs), where);
  const std::string transfers =
      fmt::format("SELECT {}{} FROM transfers x JOIN slices s ON s.slice_id = x.slice_id WHERE {}",
                  kSliceColumns, detail_columns("x", kTransferArgs), where);
  int64_t total = 0;
  using Pass = std::pair<const std::string*, std::span<const ArgColumn>>;
  std::vector<Pass> passes{Pass{&plain, {}}, Pass{&collectives, kCollectiveArgs},
                           Pass{&kernels, kKernelArgs}};
  if (has_transfers) passes.emplace_back(&transfers, kTransferArgs);
  for (const auto& [sql, details] : passes) {
    ASSIGN_OR_RETURN(int64_t written, write_slice_rows(db, *sql, selection, tracks, details, sink));
    total += written;
  }
  return total;
}

// ---- memory counters -----------------------------------------------------------------------

Status write_counter(JsonStream& sink, int rank, int64_t ts_ns, std::string_view category,
                     int64_t bytes) {
  fmt::memory_buffer& out = sink.next_element();
  open_event(out, 'C', rank);
  append_json_raw(out, ",\"ts\":");
  append_json_us(out, ts_ns);
  append_json_raw(out, ",\"name\":");
  append_json_string(out, fmt::format("memory {}", category));
  append_json_raw(out, ",\"cat\":\"memory\"");
  Args args(out);
  args.add("bytes", bytes);
  args.close();
  out.push_back('}');
  return sink.end_element();
}

// With --steps, each counter starts at the window with the bytes in use then: the last sample
// at or before the window's start, one indexed lookup per (rank, category).
StatusOr<int64_t> write_counters_at_window_start(const SqliteDb& db, const Selection& selection,
                                                 const std::vector<RankRow>& ranks,
                                                 JsonStream& sink) {
  ASSIGN_OR_RETURN(SqliteStatement categories,
                   prepare(db, "SELECT name FROM memory_category ORDER BY id"));
  std::vector<std::string> names;
  while (categories.step() == SQLITE_ROW) names.push_back(categories.column_text(0));
  ASSIGN_OR_RETURN(SqliteStatement last,
                   prepare(db,
                           "SELECT bytes FROM memory_events WHERE rank = ?1 AND category = ?2 "
                           "AND ts_ns <= ?3 ORDER BY ts_ns DESC LIMIT 1"));
  int64_t written = 0;
  for (const RankRow& r : ranks) {
    for (const std::string& category : names) {
      last.bind(1, int64_t{r.rank});
      last.bind(2, std::string_view(category));
      last.bind(3, selection.window_start);
      int rc = last.step();
      if (rc == SQLITE_ROW) {
        RETURN_IF_ERROR(
            write_counter(sink, r.rank, selection.window_start, category, last.column_int(0)));
        ++written;
      } else if (rc != SQLITE_DONE) {
        return read_error(db, "the memory samples");
      }
      last.reset();
    }
  }
  return written;
}

StatusOr<int64_t> write_counters(const SqliteDb& db, const Selection& selection,
                                 const std::vector<RankRow>& ranks, JsonStream& sink) {
  int64_t written = 0;
  if (selection.by_step) {
    ASSIGN_OR_RETURN(written, write_counters_at_window_start(db, selection, ranks, sink));
  }
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare(db,
                           "SELECT m.rank, m.ts_ns, m.category, m.bytes FROM memory_events m "
                           "WHERE " +
                               fmt::format(kRankFilter, "m") +
                               " AND (?2 IS NULL OR (m.ts_ns > ?4 AND m.ts_ns <= ?5))",
                           &selection));
  int rc = 0;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    RETURN_IF_ERROR(write_counter(sink, static_cast<int>(stmt.column_int(0)), stmt.column_int(1),
                                  stmt.column_text(2), stmt.column_int(3)));
    ++written;
  }
  if (rc != SQLITE_DONE) return read_error(db, "the memory samples");
  return written;
}

// ---- sampled counters (NVML) -----------------------------------------------------------------

// One "C" event per sample of the counters view, named as its track (gpu_sm_clock_mhz). Traces
// of schema version 1 have no counter table: nothing to write.
StatusOr<int64_t> write_sampled_counters(const SqliteDb& db, const Selection& selection,
                                         JsonStream& sink) {
  if (!db.has_table("main", "counter")) return int64_t{0};
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   prepare(db,
                           "SELECT c.rank, c.ts_ns, c.name, c.value FROM counters c WHERE " +
                               fmt::format(kRankFilter, "c") +
                               " AND (?2 IS NULL OR (c.ts_ns >= ?4 AND c.ts_ns <= ?5)) "
                               "ORDER BY c.rank, c.name, c.ts_ns",
                           &selection));
  int64_t written = 0;
  int rc = 0;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    fmt::memory_buffer& out = sink.next_element();
    open_event(out, 'C', static_cast<int>(stmt.column_int(0)));
    append_json_raw(out, ",\"ts\":");
    append_json_us(out, stmt.column_int(1));
    append_json_raw(out, ",\"name\":");
    append_json_string(out, stmt.column_text(2));
    append_json_raw(out, ",\"cat\":\"counter\"");
    Args args(out);
    args.add("value", stmt.column_double(3));
    args.close();
    out.push_back('}');
    RETURN_IF_ERROR(sink.end_element());
    ++written;
  }
  if (rc != SQLITE_DONE) return read_error(db, "the counter samples");
  return written;
}

// ---- flows ---------------------------------------------------------------------------------

// One end of an arrow: the middle of its slice, so "s" and "f" (bound to the enclosing slice)
// fall inside the slice whatever order a viewer sorts equal timestamps in.
struct FlowEnd {
  int pid = 0;
  int tid = 0;
  int64_t ts_ns = 0;
};

// Columns first..first+4 of a row: rank, track_kind, track, ts_ns, dur_ns.
FlowEnd flow_end(const SqliteStatement& row, int first, const TrackIds& tracks) {
  const int rank = static_cast<int>(row.column_int(first));
  return {rank, tracks.find(rank, row.column_text(first + 1), row.column_text(first + 2)),
          row.column_int(first + 3) + row.column_int(first + 4) / 2};
}

Status write_flow(JsonStream& sink, int64_t id, std::string_view category, std::string_view name,
                  const FlowEnd& from, const FlowEnd& to) {
  for (const FlowEnd* end : {&from, &to}) {
    fmt::memory_buffer& out = sink.next_element();
    open_event(out, end == &from ? 's' : 'f', end->pid);
    fmt::format_to(std::back_inserter(out), ",\"tid\":{},\"id\":{}{},\"ts\":", end->tid, id,
                   end == &from ? "" : ",\"bp\":\"e\"");
    append_json_us(out, end->ts_ns);
    append_json_raw(out, ",\"cat\":");
    append_json_string(out, category);
    append_json_raw(out, ",\"name\":");
    append_json_string(out, name);
    out.push_back('}');
    RETURN_IF_ERROR(sink.end_element());
  }
  return Status::ok();
}

constexpr std::string_view kEndColumns =
    "{0}.rank, {0}.track_kind, {0}.track, {0}.ts_ns, {0}.dur_ns";

// send -> recv: same communicator and seq (p2p seq counts per communicator and peer pair, so
// both sides agree), each naming the other as peer. Both ends must be exported.
StatusOr<int64_t> write_p2p_flows(const SqliteDb& db, const Selection& selection,
                                  const TrackIds& tracks, JsonStream& sink, int64_t& next_id) {
  const std::string sql = fmt::format(
      "SELECT {}, {} FROM collectives a JOIN slices sa ON sa.slice_id = a.slice_id "
      "JOIN collectives b ON b.comm_id = a.comm_id AND b.seq = a.seq AND b.rank = a.peer AND "
      "b.peer = a.rank AND b.op = 'recv' JOIN slices sb ON sb.slice_id = b.slice_id "
      "WHERE a.op = 'send' AND {} AND {}",
      fmt::format(kEndColumns, "sa"), fmt::format(kEndColumns, "sb"), slice_filter("sa"),
      slice_filter("sb"));
  ASSIGN_OR_RETURN(SqliteStatement stmt, prepare(db, sql, &selection));
  int64_t written = 0;
  int rc = 0;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    RETURN_IF_ERROR(write_flow(sink, next_id++, "p2p", "send -> recv", flow_end(stmt, 0, tracks),
                               flow_end(stmt, 5, tracks)));
    ++written;
  }
  if (rc != SQLITE_DONE) return read_error(db, "the send/recv pairs");
  return written;
}

// A collective's members (same comm_id and seq): one arrow from the member that started first
// to each other exported member. Rows come sorted by (comm_id, seq, start), so only the
// current group is held.
StatusOr<int64_t> write_collective_flows(const SqliteDb& db, const Selection& selection,
                                         const TrackIds& tracks, JsonStream& sink,
                                         int64_t& next_id) {
  const std::string sql = fmt::format(
      "SELECT c.comm_id, c.seq, c.op, {} FROM collectives c JOIN slices s ON s.slice_id = "
      "c.slice_id WHERE c.op NOT IN ('send', 'recv') AND {} ORDER BY c.comm_id, c.seq, s.ts_ns, "
      "s.rank",
      fmt::format(kEndColumns, "s"), slice_filter("s"));
  ASSIGN_OR_RETURN(SqliteStatement stmt, prepare(db, sql, &selection));
  std::string comm_id;
  int64_t seq = 0;
  FlowEnd first;
  bool in_group = false;
  int64_t written = 0;
  int rc = 0;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    std::string row_comm = stmt.column_text(0);
    const int64_t row_seq = stmt.column_int(1);
    const FlowEnd end = flow_end(stmt, 3, tracks);
    if (!in_group || row_seq != seq || row_comm != comm_id) {
      comm_id = std::move(row_comm);
      seq = row_seq;
      first = end;
      in_group = true;
      continue;
    }
    RETURN_IF_ERROR(write_flow(sink, next_id++, "collective", stmt.column_text(2), first, end));
    ++written;
  }
  if (rc != SQLITE_DONE) return read_error(db, "the collectives");
  return written;
}

// ---- the document --------------------------------------------------------------------------

// The keys other than traceEvents come after it: older Perfetto versions stop reading at a
// top-level key they do not know (distributedInfo), which is harmless once the events are in.
void write_trailer(fmt::memory_buffer& out, const RunRow& run, const std::vector<RankRow>& ranks,
                   const ChromeExportOptions& options) {
  std::vector<int> exported;
  for (const RankRow& r : ranks) exported.push_back(r.rank);
  std::sort(exported.begin(), exported.end());
  auto string_field = [&](std::string_view key, std::string_view value) {
    fmt::format_to(std::back_inserter(out), ",\"{}\":", key);
    append_json_string(out, value);
  };
  append_json_raw(out, "\n],\n\"displayTimeUnit\":\"ns\",\n");
  append_json_raw(out, "\"otherData\":{\"exporter\":\"partrain " PARTRAIN_VERSION "\"");
  string_field("run_id", run.run_id);
  string_field("command", run.command);
  string_field("status", run.status);
  string_field("ranks", format_rank_ranges(exported));
  if (options.steps) string_field("steps", step_range_text(*options.steps));
  append_json_raw(out,
                  ",\"time_unit\":\"ts and dur are microseconds on the run-wide timeline\"},\n");
  append_json_raw(out, "\"distributedInfo\":{");
  if (!run.backend.empty()) {
    append_json_raw(out, "\"backend\":");
    append_json_string(out, run.backend);
    append_json_raw(out, ",");
  }
  fmt::format_to(std::back_inserter(out), "\"rank\":{},\"world_size\":{}}}}}\n",
                 exported.empty() ? 0 : exported.front(), run.world_size.value_or(0));
}

}  // namespace

std::string format_rank_ranges(const std::vector<int>& sorted_ranks) {
  std::string text;
  for (size_t i = 0; i < sorted_ranks.size();) {
    size_t j = i;
    while (j + 1 < sorted_ranks.size() && sorted_ranks[j + 1] == sorted_ranks[j] + 1) ++j;
    text += fmt::format("{}{}", text.empty() ? "" : ",", sorted_ranks[i]);
    if (j > i) text += fmt::format("-{}", sorted_ranks[j]);
    i = j + 1;
  }
  return text;
}

StatusOr<ChromeExportCounts> export_chrome_trace(const SqliteDb& db,
                                                 const ChromeExportOptions& options,
                                                 std::ostream& out) {
  ASSIGN_OR_RETURN(std::vector<RankRow> present, read_ranks(db));
  ASSIGN_OR_RETURN(std::vector<RankRow> ranks, select_ranks(present, options.ranks));
  Selection selection;
  if (!options.ranks.empty())
    selection.ranks_json = fmt::format("[{}]", fmt::join(options.ranks, ","));
  if (options.steps) RETURN_IF_ERROR(select_steps(db, *options.steps, selection));
  ASSIGN_OR_RETURN(RunRow run, read_run(db, present));
  ASSIGN_OR_RETURN(TrackIds tracks, read_tracks(db, selection));

  JsonStream sink(out);
  append_json_raw(sink.raw(), "{\"traceEvents\":[");
  ChromeExportCounts counts;
  counts.ranks = static_cast<int>(ranks.size());
  RETURN_IF_ERROR(write_metadata(sink, ranks, tracks));
  ASSIGN_OR_RETURN(counts.slices, write_slices(db, selection, tracks, sink));
  ASSIGN_OR_RETURN(counts.counters, write_counters(db, selection, ranks, sink));
  ASSIGN_OR_RETURN(int64_t sampled, write_sampled_counters(db, selection, sink));
  counts.counters += sampled;
  int64_t next_flow_id = 1;
  ASSIGN_OR_RETURN(int64_t p2p, write_p2p_flows(db, selection, tracks, sink, next_flow_id));
  ASSIGN_OR_RETURN(int64_t grouped,
                   write_collective_flows(db, selection, tracks, sink, next_flow_id));
  counts.flows = p2p + grouped;
  write_trailer(sink.raw(), run, ranks, options);
  RETURN_IF_ERROR(sink.flush());
  out.flush();
  if (!out) return failed("writing the JSON output failed (disk full, or the reader went away?)");
  counts.events = sink.elements();
  return counts;
}

}  // namespace partrain::profiler
