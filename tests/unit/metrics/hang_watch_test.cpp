#include "metrics/hang_watch.h"

#include <gtest/gtest.h>

namespace partrain::metrics {
namespace {

using analyzers::HangState;
using analyzers::kHangQuietFloorNs;
using analyzers::kHangQuietSteps;

constexpr int64_t kS = 1'000'000'000;

analyzers::LiveRun live_run(std::vector<int64_t> last_events) {
  analyzers::LiveRun run;
  run.live = true;
  run.status = "running";
  for (size_t r = 0; r < last_events.size(); ++r) {
    analyzers::rank_row(run, static_cast<int>(r)).last_event_ns = last_events[r];
  }
  return run;
}

TEST(HangWatch, ARunStillRecordingIsNotHung) {
  analyzers::LiveRun run = live_run({100, 100});
  HangWatch watch;
  watch.observe(run, 0);
  run.ranks[0].last_event_ns = 200;  // rank 0 records again at 29 s
  watch.observe(run, 29 * kS);
  // Rank 1 has been quiet 31 s but rank 0 only 2 s: not hung.
  EXPECT_FALSE(watch.state(run, 31 * kS).hung);
  EXPECT_EQ(watch.quiet_ns(1, 31 * kS), 31 * kS);
  EXPECT_EQ(watch.quiet_ns(0, 31 * kS), 2 * kS);
  EXPECT_FALSE(watch.quiet_ns(7, 31 * kS));
}

TEST(HangWatch, EveryRankQuietPastTheThresholdIsAHangBlamingWhoStoppedAStepFirst) {
  // Rank 0 stopped 4 s before the others; the steps were 500 ms.
  analyzers::LiveRun run = live_run({5 * kS, 9 * kS, 9 * kS + 100});
  for (analyzers::RankStatus& rank : run.ranks) rank.step_ns = kS / 2;
  HangWatch watch;
  watch.observe(run, 0);
  EXPECT_FALSE(watch.state(run, kHangQuietFloorNs - 1).hung);
  const HangState hang = watch.state(run, kHangQuietFloorNs);
  EXPECT_TRUE(hang.hung);
  EXPECT_FALSE(hang.diagnosed);
  EXPECT_EQ(hang.culprit, 0);  // its latest record is the oldest on the trace's timeline
  EXPECT_EQ(hang.threshold_ns, kHangQuietFloorNs);
}

// A rank blocked in a collective and the rank that never came both fall silent within a step:
// the trace cannot tell them apart, so no one is named.
TEST(HangWatch, NoCulpritWhenTheRanksStoppedWithinAStep) {
  analyzers::LiveRun run = live_run({5 * kS, 5 * kS + 300'000'000});
  run.ranks[0].step_ns = kS / 2;
  HangWatch watch;
  watch.observe(run, 0);
  const HangState hang = watch.state(run, kHangQuietFloorNs);
  EXPECT_TRUE(hang.hung);
  EXPECT_FALSE(hang.culprit);
  // Steps of 2 s: a lead of 1.5 s is still within one.
  run = live_run({5 * kS, 6 * kS + kS / 2});
  run.ranks[1].step_ns = 2 * kS;
  HangWatch slow;
  slow.observe(run, 0);
  EXPECT_FALSE(slow.state(run, kHangQuietSteps * 2 * kS).culprit);
}

TEST(HangWatch, LongStepsRaiseTheThreshold) {
  analyzers::LiveRun run = live_run({5'000, 6'000});
  run.ranks[1].step_ns = 10 * kS;  // the slowest rank's latest step
  HangWatch watch;
  watch.observe(run, 0);
  EXPECT_EQ(watch.state(run, 0).threshold_ns, kHangQuietSteps * 10 * kS);
  EXPECT_FALSE(watch.state(run, 60 * kS).hung);
  EXPECT_TRUE(watch.state(run, 100 * kS).hung);
}

TEST(HangWatch, AFinishedOrDeadRunIsNotHung) {
  analyzers::LiveRun run = live_run({5'000, 6'000});
  HangWatch watch;
  watch.observe(run, 0);
  run.status = "completed";
  EXPECT_FALSE(watch.state(run, 100 * kS).hung);
  run.status = "running";
  run.live = false;  // its writer is gone
  EXPECT_FALSE(watch.state(run, 100 * kS).hung);
}

// Once tracing stopped (--trace-max-size, a full disk) no record reaches the trace though the
// ranks go on: the silence rule flagged a healthy run hung 30 s after the stop until it ended.
TEST(HangWatch, SilenceAfterTracingStoppedIsNoHang) {
  analyzers::LiveRun run = live_run({5 * kS, 9 * kS});
  HangWatch watch;
  watch.observe(run, 0);
  ASSERT_TRUE(watch.state(run, 10 * kHangQuietFloorNs).hung) << "the rule this test bypasses";
  run.trace_stopped = true;
  EXPECT_FALSE(watch.state(run, 10 * kHangQuietFloorNs).hung);
  // The flight recorder's diagnosis still reaches the trace (the run's own rows), and counts.
  analyzers::AnalysisReport report;
  report.outcome.diagnosis = "rank 1 never entered all_reduce seq 7 on world";
  report.outcome.diagnosis_culprit = 1;
  run.analysis.report = report;
  EXPECT_TRUE(watch.state(run, 10 * kHangQuietFloorNs).hung);
  EXPECT_EQ(watch.state(run, 10 * kHangQuietFloorNs).culprit, 1);
}

TEST(HangWatch, TheFlightRecorderDiagnosisIsAHangWithItsCulprit) {
  analyzers::LiveRun run = live_run({5'000, 6'000});
  run.status = "failed";
  analyzers::AnalysisReport report;
  report.outcome.diagnosis = "rank 1 never entered all_reduce seq 7 on world";
  report.outcome.diagnosis_culprit = 1;
  run.analysis.report = report;
  HangWatch watch;
  watch.observe(run, 0);
  const HangState hang = watch.state(run, 1);
  EXPECT_TRUE(hang.hung);
  EXPECT_TRUE(hang.diagnosed);
  EXPECT_EQ(hang.culprit, 1);
}

}  // namespace
}  // namespace partrain::metrics
