// Synthetic traces of a built-in workload run for the pipeline, memory and kernel analyzer tests:
// a runs.config in the shape `partrain launch` writes, events through the real TraceWriter, and
// a window built by hand (the window code has its own tests).
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

constexpr int64_t kMsNs = 1'000'000;

// `partrain launch --workload gpt` config for the given layout fields.
inline std::string gpt_config(int world, int pp, const std::string& schedule, int global_batch,
                              int layers = 4, int hidden = 64, int heads = 4, int seq = 32,
                              int vocab = 128) {
  return fmt::format(
      R"({{"workload":"gpt","model":{{"layers":{},"hidden":{},"heads":{},"seq":{},"vocab":{},)"
      R"("ffn":{}}},"layout":{{"world":{},"tp":1,"pp":{},"sp":false,"zero":0,"schedule":"{}",)"
      R"("vpp":1,"micro_batch":1,"pp_split":[],"bucket_bytes":25000000,"global_batch":{}}},)"
      R"("steps":3,"precision":"fp32","recompute":"none"}})",
      layers, hidden, heads, seq, vocab, 4 * hidden, world, pp, schedule, global_batch);
}

inline profiler::SliceEvent phase(int rank, const char* name, double start_ms, double end_ms,
                                  int micro_batch) {
  const auto start = static_cast<int64_t>(start_ms * kMsNs);
  return profiler::SliceEvent{rank, profiler::TrackKind::kCpuThread, "main", name,
                              profiler::SliceCategory::kPhase, start,
                              static_cast<int64_t>(end_ms * kMsNs) - start, -1, micro_batch, -1};
}

inline profiler::StepEvent step_event(int rank, int64_t step, double start_ms, double end_ms) {
  const auto start = static_cast<int64_t>(start_ms * kMsNs);
  return profiler::StepEvent{rank, step, start, static_cast<int64_t>(end_ms * kMsNs) - start,
                             1.0, 128};
}

// One window over steps [first, last] of ranks 0..world-1 spanning [start_ms, end_ms).
inline AnalysisWindow window_of(int world, int64_t first, int64_t last, double start_ms,
                                double end_ms) {
  AnalysisWindow w;
  w.run_id = "run-1";
  w.world_size = world;
  w.has_steps = true;
  w.first_step = first;
  w.last_step = last;
  w.start_ns = static_cast<int64_t>(start_ms * kMsNs);
  w.end_ns = static_cast<int64_t>(end_ms * kMsNs);
  for (int r = 0; r < world; ++r) {
    w.ranks.push_back(r);
    w.spans[r] = RankSpan{w.start_ns, w.end_ns, last - first + 1};
  }
  return w;
}

class WorkloadTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           fmt::format("workload_trace_{}_{}", getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  profiler::TraceFile write_trace(const std::string& config, int world,
                                  std::vector<profiler::TraceEvent> events) {
    return partrain::testing::write_completed_trace(dir_ / "trace.db", config, world,
                                                    std::move(events));
  }

  std::filesystem::path dir_;
};

}  // namespace partrain::analyzers::testing
