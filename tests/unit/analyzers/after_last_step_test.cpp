// after_last_step on hand-made traces: collectives past the last step that ended (outside every
// step window), and ranks whose collectives carry a step that never ended.
#include "analyzers/after_last_step.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/unit/analyzers/collective_fixture.h"

namespace partrain::analyzers {
namespace {

using fixture::CollectiveTrace;
using fixture::window;

constexpr int64_t kMs = 1'000'000;

AfterLastStep after_last_step(const profiler::TraceReader& reader, const AnalysisWindow& w) {
  AfterLastStepPass pass;
  const Status read = for_each_collective_group(reader, w, pass.visitor());
  EXPECT_TRUE(read.is_ok()) << read.message();
  StatusOr<AfterLastStep> after = pass.finish(reader);
  EXPECT_TRUE(after.is_ok()) << after.status().message();
  return after.is_ok() ? *after : AfterLastStep{};
}

// Two ranks, steps 0..4 of 20 ms with an all-reduce each, then `trailing` all-reduces 100 ms
// apart carrying step 5 (issued after step 4's optimizer.step(), in a step that never ends).
void write_run(CollectiveTrace& trace, int trailing) {
  for (int rank = 0; rank < 2; ++rank) {
    for (int64_t k = 0; k < 5; ++k) {
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = k * 20 * kMs + 5 * kMs,
                 .group = {0, 1},
                 .step = k});
      trace.step(rank, k, k * 20 * kMs, 20 * kMs);
    }
    for (int i = 0; i < trailing; ++i) {
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(5 + i),
                 .start_ns = 110 * kMs + i * 100 * kMs,
                 .group = {0, 1},
                 .step = 5});
    }
  }
}

// A new optimizer replaced the one that marks steps while the old one stayed referenced: the
// last five iterations' collectives sat after step 4, and the report's window (steps 1..4)
// left them out without a word. Now a finding says how many, how long, and why.
TEST(AfterLastStepTest, CollectivesAfterTheLastStepThatEndedAreSaid) {
  CollectiveTrace trace("after_last_step");
  write_run(trace, 5);
  const AfterLastStep after = after_last_step(trace.finish(), window({0, 1}, 0, 100 * kMs, 1, 4));
  ASSERT_EQ(after.ranks.size(), 2u);
  const RankAfterLastStep& r0 = after.ranks[0];
  EXPECT_EQ(r0.last_step, 4);
  EXPECT_EQ(r0.collectives, 5);
  EXPECT_DOUBLE_EQ(r0.time_ms, 5.0);
  EXPECT_DOUBLE_EQ(r0.span_ms, 411.0);  // step 4 ends at 100 ms, the last one at 511 ms
  EXPECT_DOUBLE_EQ(r0.step_ms, 20.0);
  const std::vector<Finding> findings = after_last_step_findings(after);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "after_last_step");
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
  EXPECT_DOUBLE_EQ(findings[0].impact, 411.0 / 511.0);
  EXPECT_EQ(
      findings[0].evidence.rfind(
          "rank 0 issued 5 collectives (5.0 ms of their own) in the 411.0 ms after step 4, "
          "the last step that ended (its mean step after the first: 20.0 ms); rank 1 issued 5 "
          "collectives",
          0),
      0u)
      << findings[0].evidence;
  EXPECT_NE(findings[0].evidence.find(": outside every step window"), std::string::npos);
  EXPECT_NE(findings[0].advice.find("docs/pytorch.md"), std::string::npos);
  const nlohmann::json json = after_last_step_json(after);
  EXPECT_EQ(json["ranks"][0]["collectives"], 5);
  EXPECT_EQ(json["ranks"][0]["worth_saying"], true);
}

// Every loop's last iteration may issue one collective after its optimizer.step() (the loss
// all-reduced for logging): listed in --json, not worth a finding.
TEST(AfterLastStepTest, OneTrailingCollectiveIsTheLoopsOrdinaryTail) {
  CollectiveTrace trace("after_last_step_one");
  write_run(trace, 1);
  const AfterLastStep after = after_last_step(trace.finish(), window({0, 1}, 0, 100 * kMs, 1, 4));
  ASSERT_EQ(after.ranks.size(), 2u);
  EXPECT_EQ(after.ranks[0].collectives, 1);
  EXPECT_TRUE(after_last_step_findings(after).empty());
  EXPECT_EQ(after_last_step_json(after)["ranks"][0]["worth_saying"], false);
}

// A GradScaler that skipped every optimizer step: step 0 began when the optimizer was made, no
// step ended, and analyze said only "whole run (no steps recorded)". Now a warning says a step
// began but none ended.
TEST(AfterLastStepTest, AStepThatBeganButNeverEndedIsAWarning) {
  CollectiveTrace trace("never_stepped");
  for (int rank = 0; rank < 2; ++rank) {
    trace.add({.rank = rank, .seq = 0, .start_ns = 0, .group = {0, 1}});  // before any step
    for (int k = 1; k < 4; ++k) {
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = k * 10 * kMs,
                 .group = {0, 1},
                 .step = 0});
    }
  }
  const AfterLastStep after = after_last_step(trace.finish(), window({0, 1}));
  EXPECT_TRUE(after.ranks.empty());
  ASSERT_EQ(after.never_ended.size(), 2u);
  EXPECT_EQ(after.never_ended[1].rank, 1);
  EXPECT_EQ(after.never_ended[1].collectives, 3);
  const std::vector<Finding> findings = after_last_step_findings(after);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "no_step_ended");
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_EQ(findings[0].evidence.rfind("rank 0 issued 3 collectives in step 0; rank 1 issued 3 "
                                       "collectives in step 0, which never ended",
                                       0),
            0u)
      << findings[0].evidence;
  EXPECT_NE(findings[0].advice.find("GradScaler"), std::string::npos);
}

// A live run's ranks are in a step that has yet to end: its collectives are not after the last.
TEST(AfterLastStepTest, ARunStillRunningHasNothingAfterItsLastStep) {
  CollectiveTrace trace("after_last_step_live");
  write_run(trace, 5);
  const AfterLastStep after = after_last_step(trace.finish(profiler::RunStatus::kRunning),
                                              window({0, 1}, 0, 100 * kMs, 1, 4));
  EXPECT_TRUE(after.ranks.empty());
  EXPECT_TRUE(after_last_step_findings(after).empty());
}

// Two ranks: step 0 of 1000 ms (a DeepSpeed job's, holding deepspeed.initialize), steps 1..4 of
// 20 ms, an all-reduce in each; then two all-gathers carrying step 5, 60 ms apart, the second
// in state `state`.
void write_warm_up_run(CollectiveTrace& trace, profiler::CollectiveState state) {
  for (int rank = 0; rank < 2; ++rank) {
    trace.step(rank, 0, 0, 1000 * kMs);
    trace.add({.rank = rank, .seq = 0, .start_ns = 500 * kMs, .group = {0, 1}, .step = 0});
    for (int64_t k = 1; k < 5; ++k) {
      const int64_t start = 1000 * kMs + (k - 1) * 20 * kMs;
      trace.step(rank, k, start, 20 * kMs);
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(k),
                 .start_ns = start + 5 * kMs,
                 .group = {0, 1},
                 .step = k});
    }
    for (int i = 0; i < 2; ++i) {
      trace.add({.rank = rank,
                 .comm = "dp1",
                 .seq = static_cast<uint64_t>(i),
                 .op = "all_gather",
                 .start_ns = 1090 * kMs + i * 60 * kMs,
                 .group = {0, 1},
                 .step = 5,
                 .state = i == 1 ? state : profiler::CollectiveState::kCompleted});
    }
  }
}

// The threshold was the mean of every step, the 1000 ms warm-up among them (216 ms): the 71 ms of
// trailing all-gathers after step 4 went unsaid. The steady steps' mean (20 ms) is the measure.
TEST(AfterLastStepTest, TheWarmUpStepIsNoPartOfTheMeanStep) {
  CollectiveTrace trace("after_last_step_warm_up");
  write_warm_up_run(trace, profiler::CollectiveState::kCompleted);
  const AfterLastStep after =
      after_last_step(trace.finish(), window({0, 1}, 1000 * kMs, 1080 * kMs, 1, 4));
  ASSERT_EQ(after.ranks.size(), 2u);
  EXPECT_EQ(after.ranks[0].collectives, 2);
  EXPECT_DOUBLE_EQ(after.ranks[0].step_ms, 20.0);
  EXPECT_DOUBLE_EQ(after.ranks[0].span_ms, 71.0);  // step 4 ends at 1080 ms, the last at 1151 ms
  const std::vector<Finding> findings = after_last_step_findings(after);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_NE(findings[0].evidence.find("(its mean step after the first: 20.0 ms)"),
            std::string::npos)
      << findings[0].evidence;
  EXPECT_DOUBLE_EQ(findings[0].impact, 71.0 / (71.0 + 1080.0));
}

// A hung run: the collective it hung in sat after the last step with the work before it, and a
// finding about replaced optimizers and final checkpoints stood beside the hang's diagnosis.
TEST(AfterLastStepTest, ARunThatFailedHasNoTailToWeigh) {
  CollectiveTrace trace("after_last_step_failed");
  write_warm_up_run(trace, profiler::CollectiveState::kStarted);
  const AfterLastStep after = after_last_step(trace.finish(profiler::RunStatus::kFailed),
                                              window({0, 1}, 1000 * kMs, 1080 * kMs, 1, 4));
  EXPECT_TRUE(after.ranks.empty());
  EXPECT_TRUE(after_last_step_findings(after).empty());
}

// A collective that never completed is no work after the last step, even in a run that ended.
TEST(AfterLastStepTest, ACollectiveThatNeverCompletedIsNotCounted) {
  CollectiveTrace trace("after_last_step_in_flight");
  write_warm_up_run(trace, profiler::CollectiveState::kStarted);
  const AfterLastStep after =
      after_last_step(trace.finish(), window({0, 1}, 1000 * kMs, 1080 * kMs, 1, 4));
  ASSERT_EQ(after.ranks.size(), 2u);
  EXPECT_EQ(after.ranks[0].collectives, 1);
  EXPECT_TRUE(after_last_step_findings(after).empty());
}

// A rank that ended no step while the others did stopped early: not this finding's.
TEST(AfterLastStepTest, ARankThatEndedNoStepAmongRanksThatDidIsLeftToOthers) {
  CollectiveTrace trace("one_never_stepped");
  for (int rank = 0; rank < 2; ++rank) {
    trace.add({.rank = rank, .seq = 0, .start_ns = 5 * kMs, .group = {0, 1}, .step = 0});
  }
  trace.step(0, 0, 0, 20 * kMs);
  const AfterLastStep after = after_last_step(trace.finish(), window({0, 1}, 0, 20 * kMs, 0, 0));
  EXPECT_TRUE(after.never_ended.empty());
  EXPECT_TRUE(after_last_step_findings(after).empty());
}

}  // namespace
}  // namespace partrain::analyzers
