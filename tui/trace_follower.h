// Keeps a ViewModel up to date with a trace, live or finished, reading only what arrived since
// the last refresh. A running trace has no secondary indexes (docs/trace-format.md, "Indexes built
// at close"), so every query here is a rowid range on an append-only table (slice, memory), a
// primary-key lookup (collective by slice id, step by (rank, step)) or a read of a small table
// (run, rank, track, stat): none scans the event tables, and nothing is read at all when
// `PRAGMA data_version` says the file has not changed.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <deque>

#include "analyzers/workload_run_config.h"
#include "core/status.h"
#include "profiler/sqlite_db.h"
#include "profiler/trace_open.h"
#include "tui/view_model.h"

namespace partrain::tui {

struct FollowLimits {
  // Rows read when a trace is first opened: the newest ones (a finished 10^8-event trace opens
  // as fast as a small one). The timeline and memory charts start there.
  int64_t initial_slices = 300'000;
  int64_t initial_memory_samples = 200'000;
  // New rows read per refresh at most; a writer faster than that is sampled at its newest rows.
  int64_t slices_per_refresh = 200'000;
  int64_t memory_samples_per_refresh = 200'000;
};

class TraceFollower {
 public:
  // Opens the trace without ever writing to it (TraceOpenMode::kReadStrict): kUnreadable (exit 3)
  // for a file that is not a readable partrain trace.
  static StatusOr<std::unique_ptr<TraceFollower>> open(const std::filesystem::path& path,
                                                       FollowLimits limits = {});
  ~TraceFollower();

  // Reads what arrived since the last call into `model`; true when anything changed. The
  // clock-driven fields (elapsed time of a live run) move every call.
  StatusOr<bool> refresh(ViewModel& model);

  const profiler::SqliteDb& db() const { return trace_.db; }
  const std::filesystem::path& path() const { return trace_.path; }
  // Rows of the event tables read so far (tests check that refreshes stay incremental).
  int64_t rows_read() const { return rows_read_; }

 private:
  struct Statements;
  struct PendingGroup;
  using GroupKey = std::tuple<int64_t, int64_t, int, int>;  // comm string id, seq, p2p pair

  TraceFollower(profiler::TraceFile trace, FollowLimits limits);
  Status read_run(ViewModel& model);
  Status read_ranks(ViewModel& model);
  Status read_tracks();
  Status read_slices(ViewModel& model, std::map<int, bool>& touched);
  Status read_memory(ViewModel& model);
  Status read_steps(ViewModel& model, std::map<int, bool>& touched);
  Status read_stats(ViewModel& model);
  void add_collective_member(ViewModel& model, int rank, const std::string& comm_id,
                             GroupKey key, const std::string& op, int64_t bytes, int group_size,
                             int64_t start_ns, int64_t end_ns);
  void derive(ViewModel& model, const std::map<int, bool>& touched);
  StatusOr<std::string> string_value(int64_t id);
  RankStatus& rank_row(ViewModel& model, int rank);
  void load_estimate(ViewModel& model);

  profiler::TraceFile trace_;
  FollowLimits limits_;
  std::unique_ptr<Statements> stmts_;
  std::optional<int64_t> data_version_;
  int64_t last_slice_id_ = -1;   // -1: not started (the first read begins near the end)
  int64_t last_memory_rowid_ = -1;
  int64_t last_track_id_ = 0;
  int64_t rows_read_ = 0;
  std::unordered_map<int64_t, std::pair<int, int>> tracks_;  // id -> (rank, kind)
  std::unordered_map<int64_t, std::string> strings_;
  std::map<int, int64_t> last_step_;  // rank -> latest step read
  std::map<GroupKey, PendingGroup> pending_;
  std::deque<GroupKey> pending_order_;
  std::optional<analyzers::WorkloadRunConfig> config_;
  bool estimate_loaded_ = false;
};

}  // namespace partrain::tui
