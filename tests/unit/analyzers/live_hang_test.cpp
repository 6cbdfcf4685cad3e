// The hang rule as `partrain top` applies it, on the trace's timeline in one read (the metrics
// endpoint's timing across refreshes: tests/unit/metrics/hang_watch_test.cpp).
#include "analyzers/live_hang.h"

#include <gtest/gtest.h>

namespace partrain::analyzers {
namespace {

constexpr int64_t kS = 1'000'000'000;

// A live run 100 s old whose ranks last recorded at the given times after its start.
LiveRun live_run(std::vector<int64_t> last_events) {
  LiveRun run;
  run.live = true;
  run.status = "running";
  run.start_ns = 5 * kS;
  run.elapsed_ns = 100 * kS;
  for (size_t r = 0; r < last_events.size(); ++r) {
    RankStatus& row = rank_row(run, static_cast<int>(r));
    row.last_event_ns = run.start_ns + last_events[r];
    row.step_ns = kS / 2;
  }
  return run;
}

TEST(LiveHang, QuietIsTimedFromTheLatestRecordToTheRunsNow) {
  LiveRun run = live_run({60 * kS, 99 * kS});
  EXPECT_EQ(quiet_on_timeline_ns(run, run.ranks[0]), 40 * kS);
  EXPECT_EQ(quiet_on_timeline_ns(run, run.ranks[1]), 1 * kS);
  run.ranks[1].last_event_ns = 0;  // nothing recorded yet
  EXPECT_FALSE(quiet_on_timeline_ns(run, run.ranks[1]));
  run.live = false;  // a finished run is not quiet
  EXPECT_FALSE(quiet_on_timeline_ns(run, run.ranks[0]));
}

TEST(LiveHang, EveryRankQuietPastTheThresholdBlamesWhoStoppedAStepFirst) {
  const LiveRun run = live_run({50 * kS, 60 * kS});
  const HangState hang = judge_hang_on_timeline(run);
  EXPECT_TRUE(hang.hung);
  EXPECT_FALSE(hang.diagnosed);
  EXPECT_EQ(hang.culprit, 0);
  EXPECT_EQ(hang.threshold_ns, kHangQuietFloorNs);
  // One rank recorded 1 s ago: not hung.
  EXPECT_FALSE(judge_hang_on_timeline(live_run({50 * kS, 99 * kS})).hung);
  // Stopped within a step of each other: hung, nobody named.
  EXPECT_FALSE(judge_hang_on_timeline(live_run({50 * kS, 50 * kS + kS / 4})).culprit);
}

TEST(LiveHang, AStoppedTraceIsNoHangButADiagnosisIs) {
  LiveRun run = live_run({50 * kS, 60 * kS});
  run.trace_stopped = true;
  EXPECT_FALSE(judge_hang_on_timeline(run).hung);
  run.diagnosis = "hang: rank 1 never joined all_reduce seq 7";
  run.diagnosis_culprit = 1;
  run.live = false;
  run.status = "failed";
  const HangState hang = judge_hang_on_timeline(run);
  EXPECT_TRUE(hang.hung);
  EXPECT_TRUE(hang.diagnosed);
  EXPECT_EQ(hang.culprit, 1);
}

}  // namespace
}  // namespace partrain::analyzers
