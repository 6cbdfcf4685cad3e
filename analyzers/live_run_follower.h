// Keeps a LiveRun up to date with a trace, live or finished, reading only what arrived since the
// last refresh. A running trace has no secondary indexes (docs/trace-format.md, "Indexes built
// at close"), so every read is a rowid range on an append-only table (slice, memory), a
// primary-key lookup (collective by slice id, step by (rank, step)) or a read of a small table
// (run, rank, track, stat), through the trace reader's live reads (live_reads.h): none scans the
// event tables, and nothing is read at all when the trace has not changed. What is derived
// from the rows is derived as `partrain analyze` derives it: the last step's split by
// BusyTime, matched collectives by CollectiveMatcher.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "analyzers/activity.h"
#include "analyzers/collective_matcher.h"
#include "analyzers/live_run.h"
#include "analyzers/workload_run_config.h"
#include "core/status.h"
#include "memory/memory_estimate.h"
#include "profiler/trace_open.h"
#include "profiler/trace_reader/live_reads.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct FollowLimits {
  // Rows read when a trace is first opened: the newest ones, by time in a finished trace (a
  // finished 10^8-event trace opens as fast as a small one). The timeline and memory charts
  // start there.
  int64_t initial_slices = 300'000;
  int64_t initial_memory_samples = 200'000;
  // New rows read per refresh at most; a writer faster than that is sampled at its newest rows.
  int64_t slices_per_refresh = 200'000;
  int64_t memory_samples_per_refresh = 200'000;
};

class LiveRunFollower {
 public:
  // Opens the trace without ever writing to it (TraceOpenMode::kReadStrict): kUnreadable (exit 3)
  // for a file that is not a readable partrain trace.
  static StatusOr<std::unique_ptr<LiveRunFollower>> open(const std::filesystem::path& path,
                                                         FollowLimits limits = {});
  ~LiveRunFollower();

  // Reads what arrived since the last call into `run`; true when anything changed. The
  // clock-driven fields (elapsed time of a live run) move every call.
  StatusOr<bool> refresh(LiveRun& run);

  const profiler::TraceReader& reader() const { return *reader_; }
  const std::filesystem::path& path() const { return trace_.path; }
  // Rows of the event tables read so far (tests check that refreshes stay incremental).
  int64_t rows_read() const { return rows_read_; }

 private:
  LiveRunFollower(profiler::TraceFile trace, FollowLimits limits);
  Status read_run(LiveRun& run);
  Status read_ranks(LiveRun& run);
  Status read_slices(LiveRun& run, std::map<int, bool>& touched);
  // The first read's newest slices (by time where the trace is indexed), then those since.
  StatusOr<profiler::StoredSliceCursor> first_or_new_slices(LiveRun& run, int64_t newest);
  void add_collective(LiveRun& run, const profiler::StoredSlice& slice);
  Status read_memory(LiveRun& run);
  Status read_steps(LiveRun& run, std::map<int, bool>& touched);
  Status read_stats(LiveRun& run);
  void derive(LiveRun& run, const std::map<int, bool>& touched);
  void derive_throughput(LiveRun& run);
  void apply_estimate(LiveRun& run);

  profiler::TraceFile trace_;
  std::unique_ptr<profiler::TraceReader> reader_;  // over trace_.db, which must not move
  ActivityByName activities_;                      // over *reader_
  FollowLimits limits_;
  std::optional<int64_t> data_version_;
  int64_t last_slice_id_ = -1;  // -1: not started (the first read begins near the end)
  int64_t last_memory_rowid_ = -1;
  int64_t rows_read_ = 0;
  std::map<int, int64_t> last_step_;  // rank -> latest step read
  // Steps some rank has recorded that not every rank has yet: they join run.history then.
  std::map<int64_t, StepPoint> pending_steps_;
  CollectiveMatcher matcher_;
  // Read again until found: `launch --tui` opens the trace before the launcher has written the
  // run's row, and a built-in workload's tokens/s and memory estimate need it.
  std::optional<WorkloadRunConfig> config_;
  std::optional<memory::MemoryEstimate> estimate_;
};

}  // namespace partrain::analyzers
