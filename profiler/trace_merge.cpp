// `partrain merge` in the library: each node file of a run is ATTACHed read-only to a fresh
// trace and copied with INSERT ... SELECT (ids shifted by offsets, strings mapped through a temp
// table), one transaction per input, so 10^7 slices never pass through C++ (docs/trace-format.md
// "Merging node files").
#include "profiler/trace_merge.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "core/log.h"
#include "core/output_path.h"
#include "core/rank_list.h"
#include "profiler/missing_ranks_stat.h"
#include "profiler/node_trace_name.h"
#include "profiler/sqlite_db.h"
#include "profiler/trace_open.h"
#include "profiler/trace_output.h"
#include "profiler/trace_reader/damaged_rows.h"
#include "profiler/trace_writer.h"

namespace partrain::profiler {

namespace {

namespace fs = std::filesystem;

// The run row of one input; NULL columns are nullopt.
struct RunRow {
  std::string run_id, command, config;
  RunStatus status = RunStatus::kRunning;
  std::optional<int64_t> start_unix_ns, end_unix_ns, start_ns, end_ns, failing_rank, world_size;
};

struct MergeInput {
  fs::path path;
  RunRow run;
  std::set<int64_t> ranks;  // world ranks with rows in rank, track, memory or step
  std::set<int64_t> nodes;  // the nodes its rank rows name
  bool has_node0 = false;   // holds rank 0 or a rank of node 0: the run-level metadata's file
  std::map<int64_t, std::string> hosts;  // each rank row's host ("" when it names none)
  bool imported = false;                 // made by `partrain import` (config's "imported_from")
};

std::optional<int64_t> optional_int(const SqliteStatement& stmt, int column) {
  if (stmt.column_is_null(column)) return std::nullopt;
  return stmt.column_int(column);
}

// A damaged page met while reading is exit 3, as open_trace would have said.
Status query_failed(const fs::path& path, const SqliteDb& db, std::string_view what) {
  return trace_read_error(db, fmt::format("reading {} of {}", what, path.string()));
}

StatusOr<RunRow> read_run_row(const TraceFile& trace) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   SqliteStatement::prepare(trace.db,
                                            "SELECT run_id, command, config, start_unix_ns, "
                                            "end_unix_ns, start_ns, end_ns, failing_rank, "
                                            "world_size FROM run WHERE id = 1"));
  if (stmt.step() != SQLITE_ROW) return query_failed(trace.path, trace.db, "the run row");
  RunRow row;
  row.run_id = stmt.column_text(0);
  row.command = stmt.column_text(1);
  row.config = stmt.column_text(2);
  row.start_unix_ns = optional_int(stmt, 3);
  row.end_unix_ns = optional_int(stmt, 4);
  row.start_ns = optional_int(stmt, 5);
  row.end_ns = optional_int(stmt, 6);
  row.failing_rank = optional_int(stmt, 7);
  row.world_size = optional_int(stmt, 8);
  row.status = trace.status;  // as open_trace reports it (a dead writer's run is incomplete)
  return row;
}

bool imported_run(const RunRow& run) {
  const nlohmann::json config = nlohmann::json::parse(run.config, nullptr, false);
  return config.is_object() && config.contains("imported_from");
}

// memory and step are keyed by (rank, ...): each next rank is one b-tree seek, not a scan.
Status add_keyed_ranks(const TraceFile& trace, std::string_view table, std::set<int64_t>& ranks) {
  std::string sql = "SELECT min(rank) FROM " + std::string(table) + " WHERE rank > ?1";
  ASSIGN_OR_RETURN(SqliteStatement stmt, SqliteStatement::prepare(trace.db, sql));
  int64_t after = std::numeric_limits<int64_t>::min();
  for (;;) {
    stmt.bind(1, after);
    if (stmt.step() != SQLITE_ROW) return query_failed(trace.path, trace.db, table);
    if (stmt.column_is_null(0)) return Status::ok();
    after = stmt.column_int(0);
    ranks.insert(after);
    stmt.reset();
  }
}

Status read_ranks(const TraceFile& trace, MergeInput& input) {
  ASSIGN_OR_RETURN(SqliteStatement rank_rows,
                   SqliteStatement::prepare(trace.db, "SELECT rank, node, host FROM rank"));
  int rc = SQLITE_ROW;
  while ((rc = rank_rows.step()) == SQLITE_ROW) {
    input.ranks.insert(rank_rows.column_int(0));
    input.hosts[rank_rows.column_int(0)] = rank_rows.column_text(2);
    if (!rank_rows.column_is_null(1)) input.nodes.insert(rank_rows.column_int(1));
    if (!rank_rows.column_is_null(1) && rank_rows.column_int(1) == 0) input.has_node0 = true;
  }
  if (rc != SQLITE_DONE) return query_failed(trace.path, trace.db, "the ranks");
  ASSIGN_OR_RETURN(SqliteStatement track_ranks,
                   SqliteStatement::prepare(trace.db, "SELECT DISTINCT rank FROM track"));
  while ((rc = track_ranks.step()) == SQLITE_ROW) input.ranks.insert(track_ranks.column_int(0));
  if (rc != SQLITE_DONE) return query_failed(trace.path, trace.db, "the tracks");
  RETURN_IF_ERROR(add_keyed_ranks(trace, "memory", input.ranks));
  RETURN_IF_ERROR(add_keyed_ranks(trace, "step", input.ranks));
  if (input.ranks.contains(0)) input.has_node0 = true;
  return Status::ok();
}

StatusOr<MergeInput> read_input(const fs::path& path) {
  ASSIGN_OR_RETURN(TraceFile trace, open_trace(path, TraceOpenMode::kRead));
  if (trace.writer_alive) {
    log::warn("{} is still being written (its writer holds {}); merging what it has committed",
              path.string(), writer_lock_path(path).string());
  }
  MergeInput input;
  input.path = path;
  ASSIGN_OR_RETURN(input.run, read_run_row(trace));
  input.imported = imported_run(input.run);
  RETURN_IF_ERROR(read_ranks(trace, input));
  return input;
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code error;
  bool same = fs::equivalent(a, b, error);
  return !error && same;
}

// Usage errors found before any input is opened as a trace (an input that cannot be one at all,
// JSON or no SQLite database, is said first).
Status check_paths(std::span<const fs::path> inputs, const fs::path& output,
                   const TraceMergeOptions& options) {
  if (inputs.empty()) return invalid_argument("merge needs at least one input trace");
  for (size_t i = 0; i < inputs.size(); ++i) {
    // A Kineto file given twice is named as one: that, not the repetition, is what to fix.
    RETURN_IF_ERROR(check_sqlite_header(inputs[i]));
    for (size_t j = 0; j < i; ++j) {
      if (inputs[j] == inputs[i]) {
        return invalid_argument("{} is given twice: give each node's trace once",
                                inputs[i].string());
      }
      if (same_file(inputs[j], inputs[i])) {
        return invalid_argument("{} and {} are the same file: give each node's trace once",
                                inputs[j].string(), inputs[i].string());
      }
    }
    if (inputs[i] == output || same_file(inputs[i], output)) {
      return invalid_argument("the output {} is also an input: write the merged trace to a new "
                              "file", output.string());
    }
  }
  return check_trace_output(output, options.overwrite, "merged trace");
}

std::string shown_run_id(const std::string& run_id) {
  return run_id.empty() ? "(none)" : run_id;
}

// All inputs are node files of one run, and every rank is in one of them only.
Status check_inputs(const std::vector<MergeInput>& inputs) {
  const MergeInput& first = inputs.front();
  for (const MergeInput& input : inputs) {
    if (input.run.run_id != first.run.run_id) {
      // An import names its run by the time of its first event: imports of one job's ranks
      // made apart name different runs.
      const bool imports = first.imported && input.imported;
      return invalid_argument(
          "{} (run {}) and {} (run {}) are traces of different runs: merge only the node files of "
          "one run{}",
          first.path.string(), shown_run_id(first.run.run_id), input.path.string(),
          shown_run_id(input.run.run_id),
          imports ? "; to bring one job's profiler traces together, import every rank's files "
                    "with one `partrain import`, which also aligns the hosts' clocks"
                  : "");
    }
  }
  std::map<int64_t, const MergeInput*> owner;
  for (const MergeInput& input : inputs) {
    for (int64_t rank : input.ranks) {
      auto [it, inserted] = owner.emplace(rank, &input);
      if (!inserted) {
        return invalid_argument("rank {} is in both {} and {}: each rank belongs to one node's "
                                "file (are these copies of the same node's trace?)", rank,
                                it->second->path.string(), input.path.string());
      }
    }
  }
  return Status::ok();
}

// One input makes a copy: said, and when the file is one node's of several (its world has ranks
// it holds nothing of), the other nodes' files are named as the launcher names them.
void warn_single_input(const MergeInput& input, const fs::path& output) {
  const int64_t world = input.run.world_size.value_or(0);
  const auto held = static_cast<int64_t>(input.ranks.size());
  if (held == 0 || world <= held || world % held != 0 || input.nodes.size() != 1) {
    log::warn(
        "one input: {} is copied as it is into {} (merge joins the trace files of a "
        "run's nodes)",
        input.path.string(), output.string());
    return;
  }
  const int node = static_cast<int>(*input.nodes.begin());
  const int64_t nodes = world / held;
  const fs::path node0 = node0_trace_path(input.path, node);
  log::warn(
      "{} is node {}'s file of a run of {} nodes ({} of its {} ranks): the other nodes' "
      "files ({}) are not merged, and {} will lack their ranks; merge them all: partrain "
      "merge {} -o {}",
      input.path.string(), node, nodes, held, world, other_node_files_text(node0, nodes, node),
      output.string(), node_files_merge_arguments(node0, nodes), output.string());
}

// "file:" URI of a path, so ATTACH can ask for mode=ro (RFC 3986 percent-encoding).
std::string read_only_uri(const fs::path& path) {
  std::string uri = "file:";
  for (unsigned char c : fs::absolute(path).string()) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '-' || c == '_' || c == '~') {
      uri += static_cast<char>(c);
    } else {
      uri += fmt::format("%{:02X}", c);
    }
  }
  return uri + "?mode=ro";
}

// An empty trace from the compiled-in schema (the writer's meta rows: format, schema_version,
// writer...), reopened here for bulk loading.
StatusOr<SqliteDb> create_output(const fs::path& path) {
  TraceWriterOptions writer_options;
  writer_options.overwrite = true;
  writer_options.disk_reserve_bytes = 0;  // closed at once, and failures are errors here
  {
    ASSIGN_OR_RETURN(auto writer, TraceWriter::create(path, writer_options));
  }  // closed: schema, views, meta and the run row are on disk
  ASSIGN_OR_RETURN(SqliteDb db, SqliteDb::open(path.string(), SQLITE_OPEN_READWRITE |
                                                                  SQLITE_OPEN_URI |
                                                                  SQLITE_OPEN_NOMUTEX));
  // The file is thrown away on any failure, so it needs no journal while it is filled; it
  // becomes a WAL trace like every other once complete (finish_output).
  RETURN_IF_ERROR(db.exec("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; "
                          "PRAGMA cache_size = -131072; PRAGMA temp_store = MEMORY; "
                          "CREATE TEMP TABLE string_map (src_id INTEGER PRIMARY KEY, "
                          "dst_id INTEGER NOT NULL)"));
  return db;
}

struct CopyCounts {
  int64_t ranks = 0, slices = 0, collectives = 0, lost_strings = 0;
};

// The input's string id in `column`, as the output's id of the same value.
std::string mapped(std::string_view column) {
  return "(SELECT dst_id FROM temp.string_map WHERE src_id = " + std::string(column) + ")";
}

struct CopyStep {
  std::string_view what;
  std::string sql;  // ?1: track id offset, ?2: slice id offset
  int64_t* rows = nullptr;
  std::string_view since_table = {};  // skipped for an input without it (an older schema)
};

// How grave a stat severity in `column` is: info < data_loss < error.
std::string severity_level(std::string_view column) {
  return "CASE " + std::string(column) + " WHEN 'error' THEN 2 WHEN 'data_loss' THEN 1 ELSE 0 END";
}

std::vector<CopyStep> string_steps() {
  return {
      {"strings", "INSERT OR IGNORE INTO main.string (value) SELECT value FROM src.string "
                  "ORDER BY id"},
      {"strings", "DELETE FROM temp.string_map"},
      {"strings", "INSERT INTO temp.string_map (src_id, dst_id) SELECT s.id, m.id "
                  "FROM src.string s JOIN main.string m ON m.value = s.value"},
  };
}

// `step_attempt`: the input's step and earlier_step attempt column, or "0" for an input older
// than version 7 (its steps are of one attempt as far as it knows).
std::vector<CopyStep> row_steps(CopyCounts& counts, const std::string& step_attempt) {
  return {
      {"ranks",
       "INSERT INTO main.rank (rank, local_rank, node, host, pid, device, clock_offset_ns, "
       "clock_uncertainty_ns, clock_drift_ppm, exit_code, exit_signal) SELECT rank, "
       "local_rank, node, host, pid, device, clock_offset_ns, clock_uncertainty_ns, "
       "clock_drift_ppm, exit_code, exit_signal FROM src.rank",
       &counts.ranks},
      {"tracks",
       "INSERT INTO main.track (id, rank, kind, name_id) SELECT t.id + ?1, t.rank, "
       "t.kind, " +
           mapped("t.name_id") + " FROM src.track t ORDER BY t.id"},
      {"slices",
       "INSERT INTO main.slice (id, track_id, ts_ns, dur_ns, name_id, category, step, "
       "micro_batch, layer) SELECT s.id + ?2, s.track_id + ?1, s.ts_ns, s.dur_ns, " +
           mapped("s.name_id") +
           ", s.category, s.step, s.micro_batch, s.layer "
           "FROM src.slice s ORDER BY s.id",
       &counts.slices},
      {"collectives",
       "INSERT INTO main.collective (slice_id, comm_id, seq, op, dtype, reduce_op, "
       "count, bytes, peer, root, comm_rank, group_size, group_ranks_id, "
       "enqueue_ns, gpu_start_ns, gpu_end_ns, state) SELECT c.slice_id + ?2, " +
           mapped("c.comm_id") + ", c.seq, " + mapped("c.op") + ", " + mapped("c.dtype") + ", " +
           mapped("c.reduce_op") +
           ", c.count, c.bytes, "
           "c.peer, c.root, c.comm_rank, c.group_size, " +
           mapped("c.group_ranks_id") +
           ", c.enqueue_ns, c.gpu_start_ns, c.gpu_end_ns, c.state FROM src.collective c "
           "ORDER BY c.slice_id",
       &counts.collectives},
      {"kernels",
       "INSERT INTO main.kernel (slice_id, correlation_id, device, stream, grid_x, "
       "grid_y, grid_z, block_x, block_y, block_z, registers, static_shared_bytes, "
       "dynamic_shared_bytes) SELECT slice_id + ?2, correlation_id, device, stream, "
       "grid_x, grid_y, grid_z, block_x, block_y, block_z, registers, "
       "static_shared_bytes, dynamic_shared_bytes FROM src.kernel ORDER BY slice_id"},
      {"memory samples",
       "INSERT INTO main.memory (rank, ts_ns, category, bytes) "
       "SELECT rank, ts_ns, category, bytes FROM src.memory"},
      // Inputs older than version 3 have no transfer table, older than 2 no counter table
      // (copy_tables skips those steps).
      {"transfers",
       "INSERT INTO main.transfer (slice_id, correlation_id, device, stream, bytes) "
       "SELECT slice_id + ?2, correlation_id, device, stream, bytes FROM src.transfer "
       "ORDER BY slice_id",
       nullptr, "transfer"},
      // Since version 4.
      {"collectives' NCCL choices",
       "INSERT INTO main.collective_nccl (slice_id, algorithm, "
       "protocol, channels) SELECT slice_id + ?2, " +
           mapped("algorithm") + ", " + mapped("protocol") +
           ", channels FROM src.collective_nccl ORDER BY slice_id",
       nullptr, "collective_nccl"},
      {"counter samples",
       "INSERT INTO main.counter (track_id, ts_ns, value) "
       "SELECT track_id + ?1, ts_ns, value FROM src.counter",
       nullptr, "counter"},
      // Since version 5.
      {"expert loads",
       "INSERT INTO main.expert_load (rank, step, layer, experts, tokens, "
       "dropped_tokens, aux_loss) SELECT rank, step, layer, experts, tokens, "
       "dropped_tokens, aux_loss FROM src.expert_load",
       nullptr, "expert_load"},
      {"steps",
       "INSERT INTO main.step (rank, step, ts_ns, dur_ns, loss, tokens, attempt) "
       "SELECT rank, step, ts_ns, dur_ns, loss, tokens, " +
           step_attempt + " FROM src.step"},
      // Since version 6.
      {"earlier steps",
       "INSERT INTO main.earlier_step (rank, step, ts_ns, dur_ns, loss, tokens, "
       "attempt) SELECT rank, step, ts_ns, dur_ns, loss, tokens, " +
           step_attempt + " FROM src.earlier_step",
       nullptr, "earlier_step"},
      // Counts of the same (name, rank) add up; the graver severity and the first description win.
      {"stats",
       "INSERT INTO main.stat (name, rank, value, severity, description) "
       "SELECT name, rank, value, severity, description FROM src.stat WHERE true "
       "ON CONFLICT (name, rank) DO UPDATE SET value = value + excluded.value, "
       "severity = CASE WHEN " +
           severity_level("excluded.severity") + " > " + severity_level("severity") +
           " THEN excluded.severity ELSE severity END, "
           "description = CASE WHEN description = '' THEN excluded.description "
           "ELSE description END"},
  };
}

// Offsets that put the input's track and slice ids after those already in the output.
StatusOr<std::pair<int64_t, int64_t>> id_offsets(SqliteDb& db) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   SqliteStatement::prepare(
                       db, "SELECT (SELECT coalesce(max(id), 0) FROM main.track) - "
                           "(SELECT coalesce(min(id), 1) FROM src.track) + 1, "
                           "(SELECT coalesce(max(id), 0) FROM main.slice) - "
                           "(SELECT coalesce(min(id), 1) FROM src.slice) + 1"));
  if (stmt.step() != SQLITE_ROW) return failed("{}", db.error_message());
  return std::pair{stmt.column_int(0), stmt.column_int(1)};
}

// A string table that lost rows leaves rows naming strings that are not there (the rule of
// damaged_rows.h): each lost string is merged as "(lost string N)", and the output's stat
// `merge_lost_strings` counts them. Returns how many were lost. The scan of every referencing
// column is paid only when the ids show a gap.
StatusOr<int64_t> map_lost_strings(SqliteDb& db, const fs::path& input) {
  ASSIGN_OR_RETURN(auto whole, db.query_text(string_table_whole_sql("src")));
  if (whole.value_or("0") == "1") return int64_t{0};
  const std::string lost = lost_string_ids_sql(db, "src");
  Status status = db.exec(fmt::format(
      "CREATE TEMP TABLE lost_string AS {0}; "
      "INSERT OR IGNORE INTO main.string (value) SELECT {1} FROM temp.lost_string; "
      "INSERT INTO temp.string_map (src_id, dst_id) SELECT l.id, m.id FROM temp.lost_string l "
      "JOIN main.string m ON m.value = {2}",
      lost, lost_string_text_sql("id"), lost_string_text_sql("l.id")));
  if (!status.is_ok()) return trace_read_error(db, "finding the strings the input lost");
  ASSIGN_OR_RETURN(auto lost_count, db.query_text("SELECT count(*) FROM temp.lost_string"));
  RETURN_IF_ERROR(db.exec("DROP TABLE temp.lost_string"));
  const int64_t n = std::stoll(lost_count.value_or("0"));
  if (n > 0) {
    log::warn("{}: its rows name {} string(s) its string table lost (the file was damaged); "
              "they are merged as '(lost string N)', and the stat merge_lost_strings counts them",
              input.string(), n);
  }
  return n;
}

Status copy_tables(SqliteDb& db, const fs::path& input, CopyCounts& counts) {
  ASSIGN_OR_RETURN(auto offsets, id_offsets(db));
  std::vector<CopyStep> steps = string_steps();
  const std::string step_attempt = db.has_column("src", "step", "attempt") ? "attempt" : "0";
  for (CopyStep& step : row_steps(counts, step_attempt)) steps.push_back(std::move(step));
  for (size_t i = 0; i < steps.size(); ++i) {
    const CopyStep& step = steps[i];
    if (i == string_steps().size()) {
      ASSIGN_OR_RETURN(const int64_t lost, map_lost_strings(db, input));
      counts.lost_strings += lost;
    }
    if (!step.since_table.empty() && !db.has_table("src", step.since_table)) continue;
    ASSIGN_OR_RETURN(SqliteStatement stmt, SqliteStatement::prepare(db, step.sql));
    // Statements without ?1/?2 ignore the binding (SQLITE_RANGE, harmless).
    stmt.bind(1, offsets.first);
    stmt.bind(2, offsets.second);
    // A damaged page of the input is unreadable input (exit 3), as every reader says.
    if (stmt.run() != SQLITE_DONE)
      return trace_read_error(db, fmt::format("copying {}", step.what));
    if (step.rows != nullptr) *step.rows += sqlite3_changes64(db.get());
  }
  return Status::ok();
}

// One input, one transaction.
Status copy_input(SqliteDb& db, const MergeInput& input, CopyCounts& counts) {
  ASSIGN_OR_RETURN(SqliteStatement attach,
                   SqliteStatement::prepare(db, "ATTACH DATABASE ?1 AS src"));
  attach.bind(1, std::string_view(read_only_uri(input.path)));
  if (attach.run() != SQLITE_DONE) {
    return failed("attaching {}: {}", input.path.string(), db.error_message());
  }
  Status status = db.exec("BEGIN");
  if (status.is_ok()) status = copy_tables(db, input.path, counts);
  if (status.is_ok()) status = db.exec("COMMIT");
  // No ROLLBACK: without a journal there is nothing to roll back, the whole file is dropped.
  if (!status.is_ok()) return status.with_context(fmt::format("merging {}", input.path.string()));
  return db.exec("DETACH DATABASE src");
}

int status_rank(RunStatus status) {
  switch (status) {
    case RunStatus::kFailed: return 4;
    case RunStatus::kKilled: return 3;
    case RunStatus::kIncomplete: return 2;
    case RunStatus::kRunning: return 1;
    case RunStatus::kCompleted: return 0;
  }
  return 0;
}

// The file whose run-level fields (command, config, world size) the merged run keeps: node 0's
// file, else one with a command, else the first.
const MergeInput& metadata_input(const std::vector<MergeInput>& inputs) {
  for (const MergeInput& input : inputs) {
    if (input.has_node0) return input;
  }
  for (const MergeInput& input : inputs) {
    if (!input.run.command.empty()) return input;
  }
  return inputs.front();
}

template <typename Pick>
std::optional<int64_t> combine(const std::vector<MergeInput>& inputs,
                               std::optional<int64_t> RunRow::*field, Pick pick) {
  std::optional<int64_t> result;
  for (const MergeInput& input : inputs) {
    const std::optional<int64_t>& value = input.run.*field;
    if (value) result = result ? pick(*result, *value) : *value;
  }
  return result;
}

// The run row by the rules of docs/trace-format.md "Merging node files".
RunRow merged_run(const std::vector<MergeInput>& inputs) {
  RunRow run = metadata_input(inputs).run;
  const MergeInput* worst = &metadata_input(inputs);
  for (const MergeInput& input : inputs) {
    if (status_rank(input.run.status) > status_rank(worst->run.status)) worst = &input;
  }
  run.status = worst->run.status;
  run.failing_rank = run.status == RunStatus::kFailed ? worst->run.failing_rank : std::nullopt;
  auto min = [](int64_t a, int64_t b) { return std::min(a, b); };
  auto max = [](int64_t a, int64_t b) { return std::max(a, b); };
  run.start_unix_ns = combine(inputs, &RunRow::start_unix_ns, min);
  run.start_ns = combine(inputs, &RunRow::start_ns, min);
  run.end_unix_ns = combine(inputs, &RunRow::end_unix_ns, max);
  run.end_ns = combine(inputs, &RunRow::end_ns, max);
  if (!run.world_size || *run.world_size <= 0) run.world_size = combine(inputs, &RunRow::world_size, max);
  return run;
}

void bind_optional(SqliteStatement& stmt, int index, const std::optional<int64_t>& value) {
  if (value) stmt.bind(index, *value); else stmt.bind_null(index);
}

// JSON array of strings, for meta('merged_from').
std::string json_string_array(const std::vector<MergeInput>& inputs) {
  std::string out = "[";
  for (const MergeInput& input : inputs) {
    if (out.size() > 1) out += ", ";
    out += '"';
    for (unsigned char c : input.path.string()) {
      if (c == '"' || c == '\\') out += fmt::format("\\{}", static_cast<char>(c));
      else if (c < 0x20) out += fmt::format("\\u{:04x}", c);
      else out += static_cast<char>(c);
    }
    out += '"';
  }
  return out + "]";
}

Status write_run_and_meta(SqliteDb& db, const RunRow& run, const std::vector<MergeInput>& inputs) {
  ASSIGN_OR_RETURN(SqliteStatement update,
                   SqliteStatement::prepare(db, "UPDATE run SET run_id = ?1, command = ?2, "
                                                "config = ?3, status = ?4, start_unix_ns = ?5, "
                                                "end_unix_ns = ?6, start_ns = ?7, end_ns = ?8, "
                                                "failing_rank = ?9, world_size = ?10 WHERE id = 1"));
  update.bind(1, std::string_view(run.run_id));
  update.bind(2, std::string_view(run.command));
  update.bind(3, std::string_view(run.config.empty() ? "{}" : run.config));
  update.bind(4, run_status_name(run.status));
  bind_optional(update, 5, run.start_unix_ns);
  bind_optional(update, 6, run.end_unix_ns);
  bind_optional(update, 7, run.start_ns);
  bind_optional(update, 8, run.end_ns);
  bind_optional(update, 9, run.failing_rank);
  bind_optional(update, 10, run.world_size);
  if (update.run() != SQLITE_DONE) return failed("writing the run row: {}", db.error_message());
  ASSIGN_OR_RETURN(SqliteStatement meta,
                   SqliteStatement::prepare(db, "INSERT OR REPLACE INTO meta (key, value) "
                                                "VALUES ('merged_from', ?1)"));
  meta.bind(1, std::string_view(json_string_array(inputs)));
  if (meta.run() != SQLITE_DONE) return failed("writing meta: {}", db.error_message());
  return Status::ok();
}

// Ranks of imports merged with the import holding the run's reference ranks whose host that
// import does not have: each import aligned the clocks of the files it read, so theirs was never
// aligned with the reference host's. Stat import_clock_unaligned, as import says it of a host no
// collective links, and a warning naming the fix.
Status record_unaligned_imports(SqliteDb& db, const std::vector<MergeInput>& inputs,
                                const MergeInput& reference) {
  if (!reference.imported) return Status::ok();
  std::set<std::string> reference_hosts;
  for (const auto& [rank, host] : reference.hosts) reference_hosts.insert(host);
  std::vector<int> unaligned;
  for (const MergeInput& input : inputs) {
    if (&input == &reference || !input.imported) continue;
    for (const auto& [rank, host] : input.hosts) {
      if (host.empty() || !reference_hosts.contains(host))
        unaligned.push_back(static_cast<int>(rank));
    }
  }
  if (unaligned.empty()) return Status::ok();
  const bool one = unaligned.size() == 1;
  log::warn(
      "{} {} {} imported apart from {}, on {} it does not hold, and {} not aligned with its "
      "hosts' clocks (an import aligns the files it reads together), so times across hosts may "
      "be off; import every rank's files with one `partrain import` to align them",
      one ? "rank" : "ranks", format_rank_list(unaligned), one ? "was" : "were",
      reference.path.string(), one ? "a host" : "hosts", one ? "is" : "are");
  ASSIGN_OR_RETURN(SqliteStatement stat,
                   SqliteStatement::prepare(
                       db,
                       "INSERT INTO stat (name, rank, value, severity, description) VALUES "
                       "('import_clock_unaligned', ?1, 1, 'data_loss', 'imported apart from "
                       "the reference host''s files and merged: this rank''s host clock was "
                       "not aligned with it, its times are its file''s own') "
                       "ON CONFLICT (name, rank) DO NOTHING"));
  for (int rank : unaligned) {
    stat.bind(1, static_cast<int64_t>(rank));
    if (stat.run() != SQLITE_DONE) return failed("writing stat: {}", db.error_message());
  }
  return Status::ok();
}

Status record_lost_strings(SqliteDb& db, int64_t lost) {
  ASSIGN_OR_RETURN(SqliteStatement stat,
                   SqliteStatement::prepare(
                       db, "INSERT INTO stat (name, rank, value, severity, description) VALUES "
                           "('merge_lost_strings', -1, ?1, 'data_loss', 'strings the rows of an "
                           "input named but its string table had lost, merged as ''(lost string "
                           "N)''') ON CONFLICT (name, rank) DO UPDATE SET value = value + "
                           "excluded.value"));
  stat.bind(1, lost);
  if (stat.run() != SQLITE_DONE) return failed("writing stat: {}", db.error_message());
  return Status::ok();
}

// An import's import_missing_ranks names the ranks of the world it had no file of. Merged with
// the imports of those ranks, the rows summed per (name, rank) would still call them missing:
// worked out again from the ranks the inputs hold together, and gone once every rank is there.
Status settle_missing_ranks(SqliteDb& db, const std::vector<MergeInput>& inputs,
                            std::optional<int64_t> world_size) {
  ASSIGN_OR_RETURN(SqliteStatement said,
                   SqliteStatement::prepare(db, "SELECT count(*) FROM stat WHERE name = ?1"));
  said.bind(1, kMissingRanksStat);
  if (said.step() != SQLITE_ROW) return failed("reading stat: {}", db.error_message());
  if (said.column_int(0) == 0 || !world_size || *world_size <= 0) return Status::ok();
  std::vector<int> merged;
  for (const MergeInput& input : inputs) {
    for (int64_t rank : input.ranks) {
      if (rank >= 0 && rank <= std::numeric_limits<int>::max())
        merged.push_back(static_cast<int>(rank));
    }
  }
  const AbsentRanks missing = absent_ranks(std::move(merged), *world_size);
  ASSIGN_OR_RETURN(SqliteStatement drop,
                   SqliteStatement::prepare(db, "DELETE FROM stat WHERE name = ?1"));
  drop.bind(1, kMissingRanksStat);
  if (drop.run() != SQLITE_DONE) return failed("writing stat: {}", db.error_message());
  if (missing.count == 0) return Status::ok();
  ASSIGN_OR_RETURN(
      SqliteStatement stat,
      SqliteStatement::prepare(db,
                               "INSERT INTO stat (name, rank, value, severity, description) VALUES "
                               "(?1, -1, ?2, 'data_loss', ?3)"));
  stat.bind(1, kMissingRanksStat);
  stat.bind(2, missing.count);
  const std::string description = missing_ranks_description(missing.phrase, *world_size);
  stat.bind(3, std::string_view(description));
  if (stat.run() != SQLITE_DONE) return failed("writing stat: {}", db.error_message());
  return Status::ok();
}

// Closes the output as a closed trace is kept, one file in rollback-journal mode (readers opening
// a WAL file read-only leave -wal and -shm beside it: analyze of every merged run did), makes it
// durable, and renames it into place.
Status finish_output(SqliteDb db, const fs::path& temporary, const fs::path& output) {
  RETURN_IF_ERROR(db.exec("PRAGMA journal_mode = DELETE"));
  db = SqliteDb();  // the whole trace is in the main file
  RETURN_IF_ERROR(sync_path(temporary, O_RDONLY));
  return rename_trace_into_place(temporary, output);
}

}  // namespace

StatusOr<TraceMergeSummary> merge_traces(std::span<const fs::path> inputs,
                                         const fs::path& given_output,
                                         const TraceMergeOptions& options) {
  // Through a symbolic link the file it names is replaced and the link kept.
  const fs::path output = follow_links(given_output);
  RETURN_IF_ERROR(check_paths(inputs, output, options));
  std::vector<MergeInput> files;
  for (const fs::path& path : inputs) {
    ASSIGN_OR_RETURN(MergeInput input, read_input(path));
    files.push_back(std::move(input));
  }
  RETURN_IF_ERROR(check_inputs(files));
  if (files.size() == 1) warn_single_input(files.front(), output);

  TemporaryTrace temporary(output, "merge");
  ASSIGN_OR_RETURN(SqliteDb db, create_output(temporary.path()));
  CopyCounts counts;
  for (const MergeInput& input : files) RETURN_IF_ERROR(copy_input(db, input, counts));
  RunRow run = merged_run(files);
  RETURN_IF_ERROR(write_run_and_meta(db, run, files));
  if (counts.lost_strings > 0) RETURN_IF_ERROR(record_lost_strings(db, counts.lost_strings));
  RETURN_IF_ERROR(settle_missing_ranks(db, files, run.world_size));
  RETURN_IF_ERROR(record_unaligned_imports(db, files, metadata_input(files)));
  Status finished = finish_output(std::move(db), temporary.path(), output);
  if (!finished.is_ok()) return finished.with_context(fmt::format("writing {}", output.string()));
  temporary.keep();  // renamed into place

  TraceMergeSummary summary;
  summary.run_id = run.run_id;
  summary.files = static_cast<int>(files.size());
  summary.ranks = counts.ranks;
  summary.slices = counts.slices;
  summary.collectives = counts.collectives;
  summary.lost_strings = counts.lost_strings;
  summary.status = run.status;
  return summary;
}

}  // namespace partrain::profiler
