// The dashboard and `partrain analyze` read one analysis report: one fixture trace fed to the
// dashboard's view model (`partrain top --json`) and to `partrain analyze --json` gives the same
// per-rank breakdown, the same skew and the same findings, both from the report the dashboard
// carries and from what it derives live (the last step's split, the matched collectives).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

TEST(DashboardAndAnalyze, ShowTheSameBreakdownSkewAndFindings) {
  ScratchDir dir;
  const std::filesystem::path trace = write_fixture(dir);
  const nlohmann::json analyze = run_json("analyze " + trace.string() + " --json");
  const nlohmann::json top = run_json("top " + trace.string() + " --json");

  // The report the dashboard shows is analyze's, field for field.
  ASSERT_TRUE(top["analysis"]["available"].get<bool>());
  EXPECT_EQ(top["analysis"]["report"], analyze);
  EXPECT_EQ(top["analysis"]["window"], analyze["window"]["description"]);

  // Per rank: the dashboard's split of the last step (read live, by rowid) is analyze's split
  // of its window (every step alike), and both are the fixture's.
  const double expected[2][4] = {{60, 30, 0, 10}, {80, 10, 0, 10}};  // compute, exposed comm,
                                                                      // exposed memcpy, idle %
  const char* keys[] = {"compute_pct", "exposed_comm_pct", "exposed_memcpy_pct", "idle_pct"};
  ASSERT_EQ(analyze["ranks"].size(), 2u);
  ASSERT_EQ(top["ranks"].size(), 2u);
  for (size_t rank = 0; rank < 2; ++rank) {
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

}  // namespace
}  // namespace partrain::testing
