// Small synthetic traces for the analyzer tests: events written with the real TraceWriter into
// a per-test temporary file and opened as `partrain analyze` opens them. Times are given in
// milliseconds (kMs) so the hand-computed answers read naturally.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analyzers/analysis_window.h"
#include "profiler/trace_open.h"
#include "profiler/trace_writer.h"
#include "tests/support/trace_fixture.h"

namespace partrain::analyzers::testing {

namespace fs = std::filesystem;
using profiler::SliceCategory;
using profiler::TraceEvent;
using profiler::TrackKind;

constexpr int64_t kMs = 1'000'000;

inline profiler::SliceEvent slice(int rank, SliceCategory category, double start_ms, double end_ms,
                                  int64_t step = -1, std::string track = "main") {
  const TrackKind kind = category == SliceCategory::kKernel || category == SliceCategory::kMemcpy ||
                                 category == SliceCategory::kMemset
                             ? TrackKind::kCudaStream
                         : category == SliceCategory::kCollective ||
                                 category == SliceCategory::kP2p
                             ? TrackKind::kComm
                             : TrackKind::kCpuThread;
  const auto start = static_cast<int64_t>(start_ms * kMs);
  return profiler::SliceEvent{rank, kind, std::move(track), "s", category, start,
                              static_cast<int64_t>(end_ms * kMs) - start, step, -1, -1};
}

// Step `step` of `rank` spanning [start_ms, end_ms), plus its `step` slice (never compute).
inline void add_step(std::vector<TraceEvent>& events, int rank, int64_t step, double start_ms,
                     double end_ms, int attempt = 0) {
  const auto start = static_cast<int64_t>(start_ms * kMs);
  const auto end = static_cast<int64_t>(end_ms * kMs);
  events.push_back(profiler::StepEvent{rank, step, start, end - start, 1.0, 128, attempt});
  events.push_back(slice(rank, SliceCategory::kStep, start_ms, end_ms, step));
}

// Window options, one field at a time.
inline WindowOptions skip_steps(int n) {
  WindowOptions options;
  options.skip_steps = n;
  return options;
}
inline WindowOptions select_steps(std::optional<int64_t> first, std::optional<int64_t> last,
                                  int skip = 1) {
  WindowOptions options;
  options.steps = StepSelection{first, last};
  options.skip_steps = skip;
  return options;
}
inline WindowOptions select_ranks(std::vector<int> ranks) {
  WindowOptions options;
  options.ranks = std::move(ranks);
  return options;
}

inline profiler::RankInfo rank_info(int rank) {
  return profiler::RankInfo{rank, rank, 0, "host", 100 + rank, "cpu"};
}

class AnalysisTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           fmt::format("analyzers_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the events after a run row (run "run-1", `world_size`), then opens the file.
  profiler::TraceFile write_trace(std::vector<TraceEvent> events, int world_size = 1) {
    const fs::path path = dir_ / fmt::format("trace{}.db", traces_++);
    return partrain::testing::write_completed_trace(path, "{}", world_size, std::move(events));
  }

  fs::path dir_;
  int traces_ = 0;
};

}  // namespace partrain::analyzers::testing
