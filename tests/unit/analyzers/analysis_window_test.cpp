// choose_window: warm-up skipping, explicit step selections, rank filters, traces without steps
// and the usage errors naming what the trace has, on small hand-made traces.
#include "analyzers/analysis_window.h"

#include <gtest/gtest.h>

#include "profiler/trace_reader/step_reads.h"
#include "tests/support/schema6_steps.h"
#include "tests/unit/analyzers/analysis_trace_fixture.h"

namespace partrain::analyzers {
namespace {

using namespace testing;  // NOLINT: the fixture's helpers

class AnalysisWindowTest : public AnalysisTraceTest {
 protected:
  // Two ranks, steps 0..3 of 10 ms; rank 1 runs 1 ms behind rank 0.
  profiler::TraceFile four_steps() {
    std::vector<TraceEvent> events = {rank_info(0), rank_info(1)};
    for (int rank = 0; rank < 2; ++rank) {
      for (int64_t step = 0; step < 4; ++step) {
        const double start = 10.0 * static_cast<double>(step) + rank;
        add_step(events, rank, step, start, start + 10);
      }
    }
    return write_trace(std::move(events), 2);
  }
};

TEST_F(AnalysisWindowTest, DefaultSkipsOneWarmUpStep) {
  auto trace = four_steps();
  auto window = choose_window(trace.db, {});
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  EXPECT_EQ(window->run_id, "run-1");
  EXPECT_EQ(window->world_size, 2);
  EXPECT_TRUE(window->has_steps);
  EXPECT_EQ(window->first_step, 1);
  EXPECT_EQ(window->last_step, 3);
  EXPECT_EQ(window->skipped_steps, 1);
  EXPECT_FALSE(window->warm_up_only);
  EXPECT_EQ(window->ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(window->spans.at(0).start_ns, 10 * kMs);
  EXPECT_EQ(window->spans.at(0).end_ns, 40 * kMs);
  EXPECT_EQ(window->spans.at(0).steps, 3);
  EXPECT_EQ(window->spans.at(1).start_ns, 11 * kMs);
  EXPECT_EQ(window->spans.at(1).end_ns, 41 * kMs);
  EXPECT_EQ(window->start_ns, 10 * kMs);
  EXPECT_EQ(window->end_ns, 41 * kMs);
}

// torchrun restarted the job: attempt 0 ran steps 0-9 and crashed, attempt 1 ran steps 0-4 and
// finished. The window is attempt 1's steps only: not attempt 0's 5-9, nor its 0-4 that share
// attempt 1's numbers.
TEST_F(AnalysisWindowTest, ARestartedJobsWindowIsTheLastAttemptsSteps) {
  std::vector<TraceEvent> events = {rank_info(0), rank_info(1)};
  for (int rank = 0; rank < 2; ++rank) {
    for (int64_t step = 0; step < 10; ++step) {
      const double start = 10.0 * static_cast<double>(step);
      add_step(events, rank, step, start, start + 10, 0);
    }
    for (int64_t step = 0; step < 5; ++step) {
      const double start = 1000.0 + 20.0 * static_cast<double>(step);
      add_step(events, rank, step, start, start + 20, 1);
    }
  }
  auto trace = write_trace(std::move(events), 2);
  auto window = choose_window(trace.db, {});
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  EXPECT_EQ(window->first_step, 1);
  EXPECT_EQ(window->last_step, 4);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(window->spans.at(rank).steps, 4);
    EXPECT_EQ(window->spans.at(rank).start_ns, 1020 * kMs);
    EXPECT_EQ(window->spans.at(rank).end_ns, 1100 * kMs);
  }
  // Steps attempt 1 did not reach are no steps of the window.
  auto beyond = choose_window(trace.db, select_steps(5, 9));
  ASSERT_FALSE(beyond.is_ok());
  EXPECT_NE(beyond.status().message().find("the trace has steps 0..4"), std::string::npos)
      << beyond.status().message();
  // What a rank's steps read is the last attempt's too.
  std::vector<int64_t> steps;
  auto cursor = profiler::rank_steps(trace.db, 0, 0, 9);
  ASSERT_TRUE(cursor.is_ok());
  for (profiler::StepRow row; cursor->next(row);) steps.push_back(row.ts_ns / kMs);
  EXPECT_EQ(steps, (std::vector<int64_t>{1000, 1020, 1040, 1060, 1080}));

  // A file older than schema version 7 stored no attempt: its steps table held each rank's latest
  // step of a number (attempt 1's 0-4, attempt 0's 5-9), read as it is.
  const fs::path path = trace.path;
  trace.db = profiler::SqliteDb();
  partrain::testing::make_schema_6(path);
  auto older = profiler::open_trace(path);
  ASSERT_TRUE(older.is_ok()) << older.status().message();
  auto mixed = choose_window(older->db, {});
  ASSERT_TRUE(mixed.is_ok()) << mixed.status().message();
  EXPECT_EQ(mixed->last_step, 9);
  EXPECT_EQ(mixed->spans.at(0).steps, 9);
  EXPECT_EQ(mixed->spans.at(0).start_ns, 50 * kMs);
}

TEST_F(AnalysisWindowTest, SkipStepsZeroKeepsWarmUpAndTwoSkipsTwo) {
  auto trace = four_steps();
  auto all = choose_window(trace.db, skip_steps(0));
  ASSERT_TRUE(all.is_ok());
  EXPECT_EQ(all->first_step, 0);
  EXPECT_EQ(all->spans.at(0).steps, 4);
  auto two = choose_window(trace.db, skip_steps(2));
  ASSERT_TRUE(two.is_ok());
  EXPECT_EQ(two->first_step, 2);
  EXPECT_EQ(two->spans.at(1).start_ns, 21 * kMs);
}

TEST_F(AnalysisWindowTest, ExplicitStepsWinOverSkipSteps) {
  auto trace = four_steps();
  auto window = choose_window(trace.db, select_steps(0, 1, 3));
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  EXPECT_EQ(window->first_step, 0);
  EXPECT_EQ(window->last_step, 1);
  EXPECT_TRUE(window->steps_selected);
  EXPECT_EQ(window->spans.at(0).end_ns, 20 * kMs);
  EXPECT_EQ(window->spans.at(0).steps, 2);
}

TEST_F(AnalysisWindowTest, OpenEndedSelectionsRunToTheRecordedEnds) {
  auto trace = four_steps();
  auto from = choose_window(trace.db, select_steps(2, std::nullopt));
  ASSERT_TRUE(from.is_ok());
  EXPECT_EQ(from->first_step, 2);
  EXPECT_EQ(from->last_step, 3);
  auto upto = choose_window(trace.db, select_steps(std::nullopt, 1));
  ASSERT_TRUE(upto.is_ok());
  EXPECT_EQ(upto->first_step, 0);
  EXPECT_EQ(upto->last_step, 1);
  // A range wider than the trace is narrowed to the recorded steps inside it.
  auto wide = choose_window(trace.db, select_steps(2, 99));
  ASSERT_TRUE(wide.is_ok());
  EXPECT_EQ(wide->last_step, 3);
}

TEST_F(AnalysisWindowTest, StepsNotInTheTraceAreUsageErrorsNamingTheRecordedRange) {
  auto trace = four_steps();
  auto window = choose_window(trace.db, select_steps(7, 9));
  ASSERT_FALSE(window.is_ok());
  EXPECT_EQ(window.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(window.status().message().find("steps 0..3"), std::string::npos)
      << window.status().message();
}

// `--steps 5:` on a trace of steps 0..4 said "--steps 5:4: the trace has steps 0..4", a range
// the user never typed (the open end filled in with the last step); it echoes what was typed.
TEST_F(AnalysisWindowTest, StepsNotInTheTraceAreNamedAsTheUserWroteThem) {
  auto trace = four_steps();
  WindowOptions from_5;
  from_5.steps = StepSelection{5, std::nullopt};
  auto window = choose_window(trace.db, from_5);
  ASSERT_FALSE(window.is_ok());
  EXPECT_EQ(window.status().message(), "--steps '5:': the trace has steps 0..3 (4 steps)");
  WindowOptions step_7;
  step_7.steps = StepSelection{7, 7};
  window = choose_window(trace.db, step_7);
  ASSERT_FALSE(window.is_ok());
  EXPECT_EQ(window.status().message(), "--steps '7': the trace has steps 0..3 (4 steps)");
}

// Rank 1 died after step 1: asked for steps 2..3 of rank 1 alone, the window would be empty and the
// report a clean nothing. Refused, naming the steps it did record; with rank 0 there is a window.
TEST_F(AnalysisWindowTest, ExplicitStepsTheSelectedRanksNeverRecordedAreAUsageError) {
  std::vector<TraceEvent> events = {rank_info(0), rank_info(1)};
  for (int64_t step = 0; step < 4; ++step) add_step(events, 0, step, 10.0 * step, 10.0 * step + 10);
  for (int64_t step = 0; step < 2; ++step) add_step(events, 1, step, 10.0 * step, 10.0 * step + 10);
  auto trace = write_trace(std::move(events), 2);
  WindowOptions rank_1 = select_steps(2, 3);
  rank_1.ranks = {1};
  auto window = choose_window(trace.db, rank_1);
  ASSERT_FALSE(window.is_ok());
  EXPECT_EQ(window.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(window.status().message(),
            "--steps '2:3': rank(s) 1 recorded no step in it (they recorded steps 0..1); choose "
            "steps they recorded, or other ranks with --rank");
  WindowOptions both = select_steps(2, 3);
  both.ranks = {0, 1};
  auto with_rank_0 = choose_window(trace.db, both);
  ASSERT_TRUE(with_rank_0.is_ok()) << with_rank_0.status().message();
  EXPECT_EQ(with_rank_0->spans.at(0).steps, 2);
}

TEST_F(AnalysisWindowTest, SkippingEveryStepIsAUsageError) {
  auto trace = four_steps();
  auto window = choose_window(trace.db, skip_steps(4));
  ASSERT_FALSE(window.is_ok());
  EXPECT_EQ(window.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(window.status().message().find("--skip-steps 4 leaves none of the 4 steps"),
            std::string::npos)
      << window.status().message();
}

// A run that failed in its second step has one step: the default warm-up skip keeps it rather
// than leaving nothing; asked for explicitly, skipping it is still an error.
TEST_F(AnalysisWindowTest, DefaultSkipKeepsALoneStep) {
  std::vector<TraceEvent> events = {rank_info(0)};
  add_step(events, 0, 0, 0, 10);
  auto trace = write_trace(std::move(events), 1);
  WindowOptions by_default = skip_steps(1);
  by_default.skip_is_default = true;
  auto window = choose_window(trace.db, by_default);
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  EXPECT_EQ(window->first_step, 0);
  EXPECT_EQ(window->skipped_steps, 0);
  EXPECT_TRUE(window->warm_up_only);  // the analyzers say so of what they find there
  EXPECT_FALSE(choose_window(trace.db, skip_steps(1)).is_ok());
}

TEST_F(AnalysisWindowTest, RankFilterKeepsThoseRanksAndRefusesOthers) {
  auto trace = four_steps();
  auto one = choose_window(trace.db, select_ranks({1}));
  ASSERT_TRUE(one.is_ok());
  EXPECT_EQ(one->ranks, std::vector<int>{1});
  EXPECT_EQ(one->spans.size(), 1u);
  EXPECT_EQ(one->start_ns, 11 * kMs);
  auto missing = choose_window(trace.db, select_ranks({0, 5}));
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("--rank 5: the trace has ranks 0,1"), std::string::npos)
      << missing.status().message();
}

TEST_F(AnalysisWindowTest, WithoutStepsEachRankIsOneWindowFromFirstToLastEvent) {
  std::vector<TraceEvent> events = {rank_info(0), rank_info(1)};
  events.push_back(slice(0, SliceCategory::kCompute, 5, 9));
  events.push_back(slice(0, SliceCategory::kCollective, 8, 12, -1, "dp0"));
  events.push_back(profiler::MemorySample{0, 0, 15 * kMs, 64});  // the last event of rank 0
  events.push_back(slice(1, SliceCategory::kCompute, 2, 3));
  auto trace = write_trace(std::move(events), 2);
  auto window = choose_window(trace.db, {});
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  EXPECT_FALSE(window->has_steps);
  EXPECT_EQ(window->spans.at(0).start_ns, 5 * kMs);
  EXPECT_EQ(window->spans.at(0).end_ns, 15 * kMs);
  EXPECT_EQ(window->spans.at(0).steps, 0);
  EXPECT_EQ(window->spans.at(1).start_ns, 2 * kMs);
  EXPECT_EQ(window->spans.at(1).end_ns, 3 * kMs);
  auto selected = choose_window(trace.db, select_steps(1, 2));
  EXPECT_EQ(selected.status().code(), StatusCode::kInvalidArgument);
  // Where steps come from, not "a job partrain did not launch" (launched jobs record none
  // without an optimizer or a profiler either).
  EXPECT_NE(selected.status().message().find("records no steps (a PyTorch job's come from its "
                                             "optimizer's step()"),
            std::string::npos)
      << selected.status().message();
}

TEST_F(AnalysisWindowTest, RanksWithoutARankRowComeFromTheirSlices) {
  std::vector<TraceEvent> events = {rank_info(0)};
  add_step(events, 0, 0, 0, 10);
  add_step(events, 0, 1, 10, 20);
  events.push_back(slice(3, SliceCategory::kCompute, 12, 14, 1));  // rank 3 has no rank row
  auto trace = write_trace(std::move(events), 4);
  auto window = choose_window(trace.db, {});
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  EXPECT_EQ(window->ranks, (std::vector<int>{0, 3}));
  // Rank 3 recorded no steps: it gets the window of the others, so its time reads as idle.
  EXPECT_EQ(window->spans.at(3).start_ns, 10 * kMs);
  EXPECT_EQ(window->spans.at(3).end_ns, 20 * kMs);
  EXPECT_EQ(window->spans.at(3).steps, 0);
}

}  // namespace
}  // namespace partrain::analyzers
