// The dashboard and `partrain analyze` read one analysis report: one fixture trace fed to the
// dashboard's view model (`partrain top --json`) and to `partrain analyze --json` gives the same
// per-rank breakdown, the same skew and the same findings, both from the report the dashboard
// carries and from what it derives live (the last step's split, the matched collectives).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <nlohmann/json.hpp>
#include <vector>

#include "profiler/trace_writer.h"
#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/unit/tui/tui_fixture.h"

namespace partrain::testing {
namespace {

// Two ranks, four identical 100 ms steps: rank 0 computes 60 ms and waits in the all-reduce
// until 90 ms, rank 1 computes 80 ms and enters the all-reduce 20 ms after rank 0.
std::filesystem::path write_fixture(const ScratchDir& dir) {
  const std::filesystem::path path = dir.path() / "run.db";
  std::vector<profiler::TraceEvent> events = two_rank_run_start();
  for (int64_t step = 0; step < 4; ++step) {
    for (auto& e : two_rank_step(step, step * 100 * kMs)) events.push_back(e);
  }
  auto writer = profiler::TraceWriter::create(path);
  EXPECT_TRUE(writer.is_ok()) << writer.status().message();
  (*writer)->append(events);
  EXPECT_TRUE((*writer)->set_run_status(profiler::RunStatus::kCompleted).is_ok());
  return path;
}

nlohmann::json run_json(const std::string& args) {
  const CommandResult result = run_partrain(args);
  EXPECT_EQ(result.exit_code, 0) << args << "\n" << result.err;
  return parse_json_output(result.out);
}

// Per rank: the dashboard's split of the last step (read live, by rowid) is analyze's split of
// its window (every step alike), and both are `expected`'s: compute, exposed comm, exposed
// memcpy and idle, % of the window.
void expect_same_splits(const nlohmann::json& analyze, const nlohmann::json& top,
                        const std::vector<std::array<double, 4>>& expected) {
  const char* keys[] = {"compute_pct", "exposed_comm_pct", "exposed_memcpy_pct", "idle_pct"};
  ASSERT_EQ(analyze["ranks"].size(), expected.size());
  ASSERT_EQ(top["ranks"].size(), expected.size());
  for (size_t rank = 0; rank < expected.size(); ++rank) {
    const nlohmann::json& window = analyze["ranks"][rank];
    const nlohmann::json& last_step = top["ranks"][rank]["last_step"];
    EXPECT_EQ(window["rank"], top["ranks"][rank]["rank"]);
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_NEAR(last_step[keys[k]].get<double>(), window[keys[k]].get<double>(), 1e-9)
          << "rank " << rank << " " << keys[k];
      EXPECT_NEAR(window[keys[k]].get<double>(), expected[rank][k], 1e-9)
          << "rank " << rank << " " << keys[k];
    }
  }
}

TEST(DashboardAndAnalyze, ShowTheSameBreakdownSkewAndFindings) {
  ScratchDir dir;
  const std::filesystem::path trace = write_fixture(dir);
  const nlohmann::json analyze = run_json("analyze " + trace.string() + " --json");
  const nlohmann::json top = run_json("top " + trace.string() + " --json");

  // The report the dashboard shows is analyze's, field for field.
  ASSERT_TRUE(top["analysis"]["available"].get<bool>());
  EXPECT_EQ(top["analysis"]["report"], analyze);
  EXPECT_EQ(top["analysis"]["window"], analyze["window"]["description"]);

  expect_same_splits(analyze, top, {{60, 30, 0, 10}, {80, 10, 0, 10}});

  // Skew: every collective the dashboard matched live arrived 20 ms apart, analyze's p50 and
  // p99 over the window's groups.
  ASSERT_EQ(analyze["collectives"].size(), 1u);
  const double skew_p50 = analyze["collectives"][0]["skew_p50_ms"].get<double>();
  EXPECT_NEAR(skew_p50, 20.0, 1e-9);
  EXPECT_NEAR(analyze["collectives"][0]["skew_p99_ms"].get<double>(), 20.0, 1e-9);
  ASSERT_EQ(top["recent_collectives"].size(), 4u);  // steps 0..3, the warm-up too
  for (const nlohmann::json& matched : top["recent_collectives"]) {
    EXPECT_NEAR(matched["skew_ms"].get<double>(), skew_p50, 1e-9);
    EXPECT_EQ(matched["last_rank"], 1);
  }

  // Findings: the same list in the same order, and rank 1 is the straggler in both.
  ASSERT_FALSE(analyze["findings"].empty());
  EXPECT_EQ(top["findings"], analyze["findings"]);
  EXPECT_EQ(top["analysis"]["straggler"], 1);
  EXPECT_EQ(analyze["stragglers"]["straggler"], 1);
  EXPECT_TRUE(top["ranks"][1]["straggler"].get<bool>());

  // Throughput by one formula: the dashboard over its latest steps (all 4 here), analyze over
  // its window (steps 1..3); with steady 100 ms steps of 2 x 1000 tokens both are 20k tokens/s.
  EXPECT_EQ(top["tokens_per_s_steps"], 4);
  EXPECT_NEAR(top["tokens_per_s"].get<double>(), 20'000, 1e-6);
  EXPECT_NEAR(analyze["window"]["tokens_per_s"].get<double>(), 20'000, 1e-6);
}

profiler::KernelRecord gpu_kernel(int rank, const char* name, int64_t stream, int64_t start_ns,
                                  int64_t dur_ns, int64_t step) {
  profiler::KernelRecord k;
  k.slice = {rank,
             profiler::TrackKind::kCudaStream,
             fmt::format("gpu0 stream {}", stream),
             name,
             profiler::SliceCategory::kKernel,
             start_ns,
             dur_ns,
             step,
             -1,
             -1};
  k.stream = stream;
  return k;
}

// Two ranks on a GPU, four 100 ms steps: each computes in a 60 ms GEMM kernel, calls NCCL's
// all-reduce on the host for 1 ms inside it (at 48 ms) and runs NCCL's kernel from 50 to 90 ms.
// Communication is the call and the kernel, 41 ms, 11 ms of it under the GEMM (the call and 10 ms
// of the kernel): compute 60%, exposed communication 30%, idle 10%.
std::filesystem::path write_gpu_fixture(const ScratchDir& dir) {
  const std::filesystem::path path = dir.path() / "gpu.db";
  std::vector<profiler::TraceEvent> events = two_rank_run_start();
  for (int64_t step = 0; step < 4; ++step) {
    const int64_t base = step * 100 * kMs;
    for (int rank = 0; rank < 2; ++rank) {
      events.push_back(gpu_kernel(rank, "ampere_sgemm_128x64_tn", 7, base, 60 * kMs, step));
      auto call = completed_all_reduce("nccl:aa", rank, {0, 1}, static_cast<uint64_t>(step), kMiB,
                                       base + 48 * kMs, 1 * kMs);
      call.step = step;
      call.gpu_start_ns = base + 50 * kMs;
      call.gpu_end_ns = base + 90 * kMs;
      events.push_back(call);
      events.push_back(gpu_kernel(rank, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 13,
                                  base + 50 * kMs, 40 * kMs, step));
      events.push_back(profiler::StepEvent{rank, step, base, 100 * kMs, 2.5, 1000});
    }
  }
  auto writer = profiler::TraceWriter::create(path);
  EXPECT_TRUE(writer.is_ok()) << writer.status().message();
  (*writer)->append(events);
  EXPECT_TRUE((*writer)->set_run_status(profiler::RunStatus::kCompleted).is_ok());
  return path;
}

// On a GPU trace NCCL's kernels are communication in analyze's breakdown, in its GPU table and
// in the dashboard's split of the last step alike (docs/analysis.md, "GPU time").
TEST(DashboardAndAnalyze, CountNcclKernelsAsCommunication) {
  ScratchDir dir;
  const std::filesystem::path trace = write_gpu_fixture(dir);
  const nlohmann::json analyze = run_json("analyze " + trace.string() + " --json");
  const nlohmann::json top = run_json("top " + trace.string() + " --json");
  EXPECT_EQ(top["analysis"]["report"], analyze);

  expect_same_splits(analyze, top, {{60, 30, 0, 10}, {60, 30, 0, 10}});
  ASSERT_EQ(analyze["gpu"].size(), 2u);
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_NEAR(analyze["ranks"][rank]["comm_ms_per_step"].get<double>(), 41.0, 1e-9);
    // The GPU table: NCCL's kernel alone, a quarter of it under the GEMM.
    const nlohmann::json& gpu = analyze["gpu"][rank];
    EXPECT_NEAR(gpu["comm_ms"].get<double>(), 3 * 40.0, 1e-9);
    EXPECT_NEAR(gpu["overlap_pct"].get<double>(), 25.0, 1e-9);
  }
  // 30% of each step exposed: the finding the dashboard shows too.
  bool exposed = false;
  for (const nlohmann::json& finding : analyze["findings"]) {
    exposed = exposed || finding["kind"] == "exposed_communication";
  }
  EXPECT_TRUE(exposed) << analyze["findings"].dump();
  EXPECT_EQ(top["findings"], analyze["findings"]);
}

}  // namespace
}  // namespace partrain::testing
