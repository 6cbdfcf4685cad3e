// Small hand-made traces for the collective analyzers' tests: collectives, steps and a run
// status written through the real TraceWriter, and windows built by hand.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "profiler/trace_writer.h"
#include "tests/support/trace_query.h"

namespace partrain::analyzers::fixture {

namespace fs = std::filesystem;

struct Op {
  int rank = 0;
  std::string comm = "dp0";
  uint64_t seq = 0;
  std::string op = "all_reduce";
  std::string dtype = "float";  // "other": a source that did not know it (nor the size)
  uint64_t bytes = 1 << 20;
  int64_t start_ns = 0;
  int64_t dur_ns = 1'000'000;
  std::vector<int> group = {0, 1, 2, 3};
  int peer = -1;  // world rank for send/recv
  int64_t gpu_start_ns = -1;
  int64_t gpu_end_ns = -1;
  int64_t step = -1;
  profiler::CollectiveState state = profiler::CollectiveState::kCompleted;
};

inline profiler::CollectiveRecord record(const Op& op) {
  profiler::CollectiveRecord r;
  r.world_rank = op.rank;
  r.step = op.step;
  r.gpu_start_ns = op.gpu_start_ns;
  r.gpu_end_ns = op.gpu_end_ns;
  r.event.comm_id = op.comm;
  r.event.seq = op.seq;
  r.event.op = op.op;
  r.event.dtype = op.dtype;
  r.event.count = op.bytes / 4;
  r.event.bytes = op.bytes;
  r.event.peer = op.peer;
  r.event.rank = op.rank;
  r.event.group_ranks = op.group;
  r.event.enqueue_ns = op.start_ns;
  r.event.start_ns = op.start_ns;
  r.event.end_ns = op.start_ns + op.dur_ns;
  r.event.state = op.state;
  return r;
}

// Writes a trace of `ops` and `steps` into a fresh file under the test's temporary directory.
class CollectiveTrace {
 public:
  // `config`: the run's config JSON.
  explicit CollectiveTrace(std::string_view name, std::string_view config = "{}") {
    path_ = fs::path(::testing::TempDir()) / fmt::format("{}_{}.db", name, getpid());
    fs::remove(path_);
    auto writer = profiler::TraceWriter::create(path_);
    EXPECT_TRUE(writer.is_ok()) << writer.status().message();
    writer_ = std::move(writer).value();
    writer_->append(profiler::RunInfo{"run-1", "test", std::string(config), 4, 1, 0});
  }
  ~CollectiveTrace() { fs::remove(path_); }
  void add(const Op& op) { writer_->append(record(op)); }
  void add(const profiler::StatEvent& stat) { writer_->append(stat); }
  void step(int rank, int64_t step, int64_t ts_ns, int64_t dur_ns) {
    writer_->append(profiler::StepEvent{rank, step, ts_ns, dur_ns, 1.0, 64});
  }
  // Closes the writer with the given status and opens the file for reading.
  const profiler::SqliteDb& finish(profiler::RunStatus status = profiler::RunStatus::kCompleted) {
    EXPECT_TRUE(writer_->set_run_status(status).is_ok());
    writer_.reset();
    query_ = std::make_unique<testing::TraceQuery>(path_);
    return query_->db();
  }

 private:
  fs::path path_;
  std::unique_ptr<profiler::TraceWriter> writer_;
  std::unique_ptr<testing::TraceQuery> query_;
};

// Every listed rank over [start, end]; steps first..last when given.
inline AnalysisWindow window(std::vector<int> ranks, int64_t start_ns = 0,
                             int64_t end_ns = int64_t{1} << 60, int64_t first_step = -1,
                             int64_t last_step = -1) {
  AnalysisWindow w;
  w.run_id = "run-1";
  w.world_size = 4;
  w.ranks = ranks;
  for (int r : ranks) w.spans[r] = RankSpan{start_ns, end_ns, 0};
  w.start_ns = start_ns;
  w.end_ns = end_ns;
  w.has_steps = first_step >= 0;
  w.first_step = first_step;
  w.last_step = last_step;
  return w;
}

}  // namespace partrain::analyzers::fixture
