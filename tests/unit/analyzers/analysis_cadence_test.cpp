#include "analyzers/analysis_cadence.h"

#include <gtest/gtest.h>

#include "tests/support/scratch_dir.h"
#include "tests/unit/tui/tui_fixture.h"

namespace partrain::analyzers {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(AnalysisCadence, RunsFirstThenOnlyAfterChangesAndAPauseOf40TimesItsCost) {
  AnalysisCadence cadence;
  EXPECT_TRUE(cadence.due(0));
  cadence.ran(0, 2 * kSecond);  // took 2 s: the next run waits 80 s
  EXPECT_FALSE(cadence.due(200 * kSecond));  // nothing changed
  cadence.trace_changed();
  EXPECT_FALSE(cadence.due(81 * kSecond));
  EXPECT_TRUE(cadence.due(82 * kSecond));
  cadence.ran(82 * kSecond, 82 * kSecond + 1'000'000);  // cheap: the 5 s floor applies
  cadence.trace_changed();
  EXPECT_FALSE(cadence.due(86 * kSecond));
  EXPECT_TRUE(cadence.due(87 * kSecond + 1'000'000));
}

TEST(RefreshAnalysis, GivesTheAnalyzersStragglerAndStatistics) {
  testing::ScratchDir dir;
  std::vector<profiler::TraceEvent> events = testing::two_rank_run_start();
  for (int64_t step = 0; step < 4; ++step) {
    for (auto& e : testing::two_rank_step(step, step * 100 * testing::kMs)) events.push_back(e);
  }
  auto writer = profiler::TraceWriter::create(dir.path() / "run.db");
  ASSERT_TRUE(writer.is_ok());
  (*writer)->append(events);
  ASSERT_TRUE((*writer)->set_run_status(profiler::RunStatus::kCompleted).is_ok());
  writer->reset();
  auto trace = profiler::open_trace(dir.path() / "run.db");
  ASSERT_TRUE(trace.is_ok());
  LiveAnalysis summary;
  ASSERT_TRUE(refresh_analysis(trace->db, summary).is_ok());
  EXPECT_TRUE(summary.available());
  EXPECT_EQ(summary.note, "steps 1..3 (warm-up 1 skipped)");
  // Rank 1 arrives 20 ms late at every all-reduce: a fifth of each 100 ms step.
  EXPECT_EQ(summary.straggler(), 1);
  const std::vector<CollectiveStatsRow>& collective_rows = summary.report->collectives.rows;
  ASSERT_EQ(collective_rows.size(), 1u);
  EXPECT_EQ(collective_rows[0].comm_id, "dp");
  EXPECT_EQ(collective_rows[0].count, 6);  // 3 steps x 2 ranks
  EXPECT_NEAR(collective_rows[0].skew_p50_ms, 20.0, 1e-9);
  bool straggler_finding = false;
  for (const auto& f : summary.findings()) straggler_finding |= f.kind == "straggler" && f.rank == 1;
  EXPECT_TRUE(straggler_finding);
}

// A run none of whose processes became a rank: while it runs one may still come (nothing to
// show yet); once it ended, the report says none came, as analyze's does (top showed no finding).
TEST(RefreshAnalysis, ARunWithNoRankIsSaidOnceItEnded) {
  for (const profiler::RunStatus status :
       {profiler::RunStatus::kRunning, profiler::RunStatus::kCompleted}) {
    testing::ScratchDir dir;
    auto writer = profiler::TraceWriter::create(dir.path() / "run.db");
    ASSERT_TRUE(writer.is_ok());
    (*writer)->append(profiler::RunInfo{"run-1", "partrain trace -- torchrun", "{}", 2, 0, 0});
    // A live run's writer is still open as it is read (a reader marks a running trace whose
    // writer is gone incomplete).
    ASSERT_TRUE((*writer)->commit().is_ok());
    if (status != profiler::RunStatus::kRunning) {
      ASSERT_TRUE((*writer)->set_run_status(status).is_ok());
      writer->reset();
    }
    auto trace = profiler::open_trace(dir.path() / "run.db");
    ASSERT_TRUE(trace.is_ok());
    LiveAnalysis summary;
    ASSERT_TRUE(refresh_analysis(trace->db, summary).is_ok());
    if (status == profiler::RunStatus::kRunning) {
      EXPECT_FALSE(summary.available());
      EXPECT_EQ(summary.note, "no steps to analyse yet");
      continue;
    }
    ASSERT_TRUE(summary.available());
    ASSERT_EQ(summary.findings().size(), 1u);
    EXPECT_EQ(summary.findings()[0].kind, "nothing_recorded");
    EXPECT_NE(summary.findings()[0].evidence.find("no process of the run became a rank"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace partrain::analyzers
