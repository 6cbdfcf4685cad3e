#include "analyzers/live_run_follower.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/support/scratch_dir.h"
#include "tests/unit/tui/tui_fixture.h"

namespace partrain::analyzers {
namespace {

using testing::kMiB;
using testing::kMs;

class LiveRunFollowerTest : public ::testing::Test {
 protected:
  std::filesystem::path path() const { return dir_.path() / "run.db"; }
  std::unique_ptr<profiler::TraceWriter> live_writer() {
    auto writer = profiler::TraceWriter::create(path());
    EXPECT_TRUE(writer.is_ok()) << writer.status().message();
    (*writer)->append(testing::two_rank_run_start());
    (*writer)->append(testing::two_rank_step(1, 0));
    EXPECT_TRUE((*writer)->commit().is_ok());
    return std::move(writer).value();
  }
  std::unique_ptr<LiveRunFollower> follower() {
    auto opened = LiveRunFollower::open(path());
    EXPECT_TRUE(opened.is_ok()) << opened.status().message();
    return std::move(opened).value();
  }

  testing::ScratchDir dir_;
};

TEST_F(LiveRunFollowerTest, ReadsRanksStepsAndTheLastStepsSplit) {
  auto writer = live_writer();
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  EXPECT_EQ(model.run_id, "run-tui");
  EXPECT_EQ(model.status, "running");
  EXPECT_TRUE(model.live);
  ASSERT_EQ(model.ranks.size(), 2u);
  EXPECT_EQ(model.ranks[0].host, "node7");
  EXPECT_EQ(model.ranks[0].step, 1);
  EXPECT_EQ(model.ranks[0].step_ns, 100 * kMs);
  ASSERT_TRUE(model.ranks[0].breakdown);
  // docs/analysis.md's exclusive split: compute + exposed comm + idle = the step.
  EXPECT_EQ(model.ranks[0].breakdown->compute_ns, 60 * kMs);
  EXPECT_EQ(model.ranks[0].breakdown->exposed_comm_ns(), 30 * kMs);
  EXPECT_EQ(model.ranks[0].breakdown->idle_ns(), 10 * kMs);
  EXPECT_EQ(model.ranks[1].breakdown->compute_ns, 80 * kMs);
  EXPECT_EQ(model.ranks[1].breakdown->exposed_comm_ns(), 10 * kMs);
  EXPECT_EQ(model.step, 1);
  // 2 x 1000 tokens (no workload config: each rank counts its own) in 100 ms.
  ASSERT_TRUE(model.tokens_per_s);
  EXPECT_DOUBLE_EQ(*model.tokens_per_s, 20'000);
}

// Events lost are the data-loss stats' count, as analyze counts them: a rank's error (an uncaught
// exception) and an info stat are no lost events.
TEST_F(LiveRunFollowerTest, EventsLostAreTheDataLossStatsOnly) {
  auto writer = live_writer();
  writer->append(profiler::StatEvent{"tracer_dropped_events", 0, 5,
                                     profiler::StatSeverity::kDataLoss, "dropped"});
  writer->append(profiler::StatEvent{"rank_uncaught_exception", 1, 1,
                                     profiler::StatSeverity::kError, "ValueError"});
  writer->append(profiler::StatEvent{"collector_unclean_disconnects", 0, 1,
                                     profiler::StatSeverity::kInfo, "a rank left"});
  ASSERT_TRUE(writer->commit().is_ok());
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  EXPECT_EQ(model.data_loss_events, 5);
}

// A trace whose tracing stopped (--trace-max-size) is said, and the events it drops after the
// stop are followed as the writer counts them (the endpoint served the count at the stop).
TEST_F(LiveRunFollowerTest, ATraceThatStoppedIsSaidAndItsDroppedCountFollowed) {
  profiler::TraceWriterOptions options;
  options.max_file_bytes = 1 << 20;
  options.max_commit_interval = std::chrono::milliseconds(50);
  auto created = profiler::TraceWriter::create(path(), options);
  ASSERT_TRUE(created.is_ok()) << created.status().message();
  std::unique_ptr<profiler::TraceWriter> writer = std::move(created).value();
  writer->append(testing::two_rank_run_start());
  ASSERT_TRUE(writer->commit().is_ok());
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  EXPECT_FALSE(model.trace_stopped);
  int64_t ts = 0;
  auto slices = [&ts](int count) {
    std::vector<profiler::TraceEvent> batch;
    for (int i = 0; i < count; ++i, ++ts) {
      batch.push_back(profiler::SliceEvent{0, profiler::TrackKind::kCpuThread, "main",
                                           fmt::format("op{}", ts % 7),
                                           profiler::SliceCategory::kCompute, ts, 1, 0, -1, -1});
    }
    return batch;
  };
  for (int batch = 0; batch < 500 && writer->stop_reason().empty(); ++batch) {
    writer->append(slices(1000));
    (void)writer->commit();
  }
  ASSERT_FALSE(writer->stop_reason().empty()) << "1 MiB never filled up";
  ASSERT_TRUE(f->refresh(model).is_ok());
  EXPECT_TRUE(model.trace_stopped);
  const int64_t at_stop = model.data_loss_events;
  EXPECT_EQ(at_stop, static_cast<int64_t>(writer->events_dropped()));
  writer->append(slices(400));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  writer->commit_if_due();
  ASSERT_TRUE(f->refresh(model).is_ok());
  EXPECT_EQ(model.data_loss_events, at_stop + 400);
  EXPECT_TRUE(model.trace_stopped);
}

// The counters behind partrain_steps_total and partrain_collective_*_total: every step and every
// matched collective read, across refreshes (the recent ones the model keeps are bounded).
TEST_F(LiveRunFollowerTest, CountsEveryStepAndMatchedCollectiveRead) {
  auto writer = live_writer();  // step 1
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  for (int64_t step = 2; step < 5; ++step)
    writer->append(testing::two_rank_step(step, step * 100 * kMs));
  ASSERT_TRUE(writer->commit().is_ok());
  ASSERT_TRUE(f->refresh(model).is_ok());
  ASSERT_EQ(model.ranks.size(), 2u);
  EXPECT_EQ(model.ranks[1].steps_total, 4);
  EXPECT_EQ(model.ranks[1].steps_total_ns, 4 * 100 * kMs);
  const CollectiveTotals& totals = model.collective_totals[{"dp", "all_reduce", ""}];
  EXPECT_EQ(totals.ops, 4);
  EXPECT_EQ(totals.bytes, 4 * kMiB);
}

// An op its caller labelled (a mixture of experts' dispatch) keeps its label in the dashboard's
// recent collectives; the one without a label has none.
TEST_F(LiveRunFollowerTest, ALabelledCollectiveKeepsItsLabel) {
  auto writer = live_writer();
  for (int rank = 0; rank < 2; ++rank) {
    auto dispatch = testing::completed_all_reduce("ep", rank, {0, 1}, 0, kMiB, 200 * kMs, kMs);
    dispatch.event.op = "all_to_all";
    dispatch.event.reduce_op = "";
    dispatch.event.label = "moe_dispatch";
    writer->append(dispatch);
  }
  ASSERT_TRUE(writer->commit().is_ok());
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  ASSERT_EQ(model.collectives.size(), 2u);
  const MatchedCollective& dispatch = model.collectives.back();
  EXPECT_EQ(dispatch.comm_id, "ep");
  EXPECT_EQ(dispatch.op, "all_to_all");
  EXPECT_EQ(dispatch.label, "moe_dispatch");
  EXPECT_EQ(model.collectives.front().label, "");
}

// A matched barrier has a time but no busbw (no bytes move): null in top --json, '-' in its
// table and no metrics series, not "0 B/s".
TEST_F(LiveRunFollowerTest, AMatchedBarrierHasNoBusbw) {
  auto writer = live_writer();
  for (int rank = 0; rank < 2; ++rank) {
    auto barrier = testing::completed_all_reduce("world", rank, {0, 1}, 0, 0, 200 * kMs, kMs);
    barrier.event.op = "barrier";
    barrier.event.reduce_op = "";
    writer->append(barrier);
  }
  ASSERT_TRUE(writer->commit().is_ok());
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  const auto barrier = std::find_if(model.collectives.begin(), model.collectives.end(),
                                    [](const MatchedCollective& m) { return m.op == "barrier"; });
  ASSERT_NE(barrier, model.collectives.end());
  EXPECT_GT(barrier->time_ns, 0);
  EXPECT_FALSE(barrier->busbw_gbps);
}

TEST_F(LiveRunFollowerTest, MatchesCollectivesAcrossRanks) {
  auto writer = live_writer();
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  ASSERT_EQ(model.collectives.size(), 1u);
  const MatchedCollective& m = model.collectives.back();
  EXPECT_EQ(m.comm_id, "dp");
  EXPECT_EQ(m.op, "all_reduce");
  EXPECT_EQ(m.bytes, kMiB);
  EXPECT_EQ(m.skew_ns, 20 * kMs);      // rank 1 starts 20 ms after rank 0
  EXPECT_EQ(m.last_rank, 1);
  EXPECT_EQ(m.time_ns, 20 * kMs);      // median of 30 ms and 10 ms
  // busbw = S / t x 2(n-1)/n = 1 MiB / 20 ms x 1 (nccl-tests, n = 2).
  ASSERT_TRUE(m.busbw_gbps);
  EXPECT_NEAR(*m.busbw_gbps, 1048576.0 / 0.020 / 1e9, 1e-9);
  ASSERT_TRUE(model.ranks[0].collective);
  EXPECT_TRUE(model.ranks[0].collective->matched);
  EXPECT_EQ(model.ranks[0].collective->waited_ns, 20 * kMs);  // waited for rank 1
  EXPECT_EQ(model.ranks[1].collective->waited_ns, 0);
}

TEST_F(LiveRunFollowerTest, KeepsMemoryInUseAndPeaksByCategory) {
  auto writer = live_writer();
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  const size_t params = static_cast<size_t>(memory::Category::kParams);
  const size_t activations = static_cast<size_t>(memory::Category::kActivations);
  EXPECT_EQ(model.ranks[0].memory_bytes[params], 4 * kMiB);
  EXPECT_EQ(model.ranks[0].memory_bytes[activations], 2 * kMiB);
  EXPECT_EQ(model.ranks[0].memory_total(), 6 * kMiB);
  EXPECT_EQ(model.memory[0].peak_total, 6 * kMiB);
  ASSERT_EQ(model.memory[0].points.size(), 2u);
  EXPECT_EQ(model.memory[0].points.back().bytes[activations], 2 * kMiB);
  EXPECT_FALSE(model.memory[0].estimate_total);  // not a built-in workload's config
}

TEST_F(LiveRunFollowerTest, RefreshReadsOnlyWhatArrived) {
  auto writer = live_writer();
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(*f->refresh(model));
  const int64_t first = f->rows_read();
  EXPECT_FALSE(*f->refresh(model));  // nothing committed since: nothing read
  EXPECT_EQ(f->rows_read(), first);

  writer->append(testing::two_rank_step(2, 100 * kMs));
  ASSERT_TRUE(writer->commit().is_ok());
  ASSERT_TRUE(*f->refresh(model));
  // 4 slices (2 compute, 2 collective) and 2 step rows, and nothing read twice.
  EXPECT_EQ(f->rows_read() - first, 6);
  EXPECT_EQ(model.ranks[0].step, 2);
  EXPECT_EQ(model.step, 2);
  EXPECT_EQ(model.collectives.size(), 2u);
  EXPECT_EQ(model.collectives.back().seq, 2);
}

// The timeline follows the latest slice, not the run's end row; it says older slices were not
// loaded only when the first read skipped some.
TEST_F(LiveRunFollowerTest, KnowsTheLatestSliceAndWhetherOlderOnesWereSkipped) {
  {
    auto writer = live_writer();
    writer->append(testing::two_rank_step(2, 100 * kMs));
    ASSERT_TRUE(writer->set_run_status(profiler::RunStatus::kCompleted).is_ok());
  }
  auto all = follower();
  LiveRun model;
  ASSERT_TRUE(all->refresh(model).is_ok());
  EXPECT_FALSE(model.older_slices_dropped);
  EXPECT_EQ(model.data_end_ns, 200 * kMs);  // step 2 of rank 1 ends there
  EXPECT_GE(model.end_ns, model.data_end_ns);

  FollowLimits few;
  few.initial_slices = 2;
  auto newest = LiveRunFollower::open(path(), few);
  ASSERT_TRUE(newest.is_ok());
  LiveRun sampled;
  ASSERT_TRUE((*newest)->refresh(sampled).is_ok());
  EXPECT_TRUE(sampled.older_slices_dropped);
}

// An import writes rank by rank: rank 0's ten steps, then rank 1's. The first read of the
// finished trace keeps its newest slices by time, every rank's, not the newest ids (rank 1's
// alone, which left rank 0 with nothing: 100% idle on the dashboard).
TEST_F(LiveRunFollowerTest, AFinishedTraceWrittenRankByRankOpensAtEveryRanksNewestSlices) {
  {
    auto writer = profiler::TraceWriter::create(path());
    ASSERT_TRUE(writer.is_ok()) << writer.status().message();
    (*writer)->append(testing::two_rank_run_start());
    for (int rank : {0, 1}) {
      for (int64_t step = 1; step <= 10; ++step) {
        (*writer)->append(testing::compute_slice(rank, step * 100 * kMs, 60 * kMs, step));
      }
      ASSERT_TRUE((*writer)->commit().is_ok());
    }
    ASSERT_TRUE((*writer)->set_run_status(profiler::RunStatus::kCompleted).is_ok());
  }
  FollowLimits few;
  few.initial_slices = 6;
  auto opened = LiveRunFollower::open(path(), few);
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  LiveRun model;
  ASSERT_TRUE((*opened)->refresh(model).is_ok());
  EXPECT_TRUE(model.older_slices_dropped);
  for (int rank : {0, 1}) {
    ASSERT_EQ(model.slices[rank].size(), 3u) << rank;  // steps 8, 9 and 10
    EXPECT_EQ(model.slices[rank].front().start_ns, 800 * kMs) << rank;
    EXPECT_EQ(model.slices[rank].back().start_ns, 1000 * kMs) << rank;
  }
  // Nothing new: nothing read again.
  const int64_t read = (*opened)->rows_read();
  ASSERT_TRUE((*opened)->refresh(model).is_ok());
  EXPECT_EQ((*opened)->rows_read(), read);
}

TEST_F(LiveRunFollowerTest, AFinishedRunReadsAsCompleted) {
  {
    auto writer = live_writer();
    ASSERT_TRUE(writer->set_run_status(profiler::RunStatus::kCompleted).is_ok());
  }
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  EXPECT_EQ(model.status, "completed");
  EXPECT_FALSE(model.live);
}

TEST_F(LiveRunFollowerTest, ARunWhoseWriterDiedReadsAsIncompleteWithoutWritingTheFile) {
  {
    auto writer = live_writer();
  }  // closed without a final status, like a killed launcher's file
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  EXPECT_EQ(model.status, "incomplete");
}

// `launch --tui` opens the trace as soon as the collector has made it, before the launcher has
// filled in the run's configuration: tokens/s (each token once across tensor parallelism) and
// the memory estimate appear once it arrives, not never.
TEST_F(LiveRunFollowerTest, ReadsTheWorkloadConfigOnceTheRunRowHasIt) {
  auto writer = live_writer();  // runs.config '{}' so far
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  ASSERT_TRUE(model.tokens_per_s);
  EXPECT_DOUBLE_EQ(*model.tokens_per_s, 20'000);  // no config yet: each rank counts its own
  EXPECT_FALSE(model.memory[0].estimate_total);

  // Both ranks are one replica (tp 2), as `partrain launch --workload gpt` writes it.
  const std::string config =
      R"({"workload":"gpt","model":{"layers":2,"hidden":64,"heads":4,"seq":32,"vocab":128,)"
      R"("ffn":256},"layout":{"world":2,"tp":2,"pp":1,"sp":false,"zero":0,"schedule":"1f1b",)"
      R"("vpp":1,"micro_batch":1,"pp_split":[],"bucket_bytes":25000000,"global_batch":1},)"
      R"("steps":3,"precision":"fp32","recompute":"none"})";
  writer->append(std::vector<profiler::TraceEvent>{
      profiler::RunInfo{"run-tui", "partrain launch -n 2", config, 2, 0, 0}});
  ASSERT_TRUE(writer->commit().is_ok());
  ASSERT_TRUE(f->refresh(model).is_ok());
  ASSERT_TRUE(model.tokens_per_s);
  EXPECT_DOUBLE_EQ(*model.tokens_per_s, 10'000);  // 2 x 1000 tokens / tp 2 in 100 ms
  ASSERT_TRUE(model.ranks[0].tokens_per_s);
  EXPECT_DOUBLE_EQ(*model.ranks[0].tokens_per_s, 5'000);  // per GPU: they add up to the run's
  EXPECT_TRUE(model.memory[0].estimate_total);
  EXPECT_TRUE(model.memory[1].estimate_total);
}

// Tokens/s covers the latest 10 steps every rank finished, so one slow step moves it a little,
// not fourfold; the history keeps every finished step with its slowest rank's time and loss.
TEST_F(LiveRunFollowerTest, ThroughputCoversTheLatestStepsAndTheHistoryKeepsEach) {
  auto writer = profiler::TraceWriter::create(path());
  ASSERT_TRUE(writer.is_ok());
  (*writer)->append(testing::two_rank_run_start());
  std::vector<profiler::TraceEvent> steps;
  for (int64_t step = 0; step < 12; ++step) {
    // Steps of 100 ms back to back; the last one takes 400 ms on rank 1.
    for (int rank : {0, 1}) {
      const int64_t dur = step == 11 && rank == 1 ? 400 * kMs : 100 * kMs;
      steps.push_back(
          profiler::StepEvent{rank, step, step * 100 * kMs, dur, 3.0 - 0.1 * step, 1000});
    }
  }
  (*writer)->append(steps);
  ASSERT_TRUE((*writer)->commit().is_ok());
  auto f = follower();
  LiveRun model;
  ASSERT_TRUE(f->refresh(model).is_ok());
  // Steps 2..11: 10 x 2 x 1000 tokens from 200 ms to 1500 ms (one step alone: 2000 / 0.4 s).
  ASSERT_TRUE(model.tokens_per_s);
  EXPECT_EQ(model.throughput_steps, 10);
  EXPECT_DOUBLE_EQ(*model.tokens_per_s, 20'000 / 1.3);
  // Rank 0's own steps 2..11 end at 1200 ms.
  EXPECT_DOUBLE_EQ(*model.ranks[0].tokens_per_s, 10'000 / 1.0);
  ASSERT_EQ(model.history.size(), 12u);
  EXPECT_EQ(model.history.front().step, 0);
  EXPECT_EQ(model.history.back().slowest_ns, 400 * kMs);
  EXPECT_EQ(model.history.back().ranks, 2);
  ASSERT_TRUE(model.history.back().loss);
  EXPECT_DOUBLE_EQ(*model.history.back().loss, 3.0 - 0.1 * 11);
}

TEST_F(LiveRunFollowerTest, NotATraceIsUnreadable) {
  { std::FILE* file = std::fopen(path().c_str(), "w"); std::fputs("hello", file); std::fclose(file); }
  auto opened = LiveRunFollower::open(path());
  ASSERT_FALSE(opened.is_ok());
  EXPECT_EQ(opened.status().exit_code(), 3);
}

}  // namespace
}  // namespace partrain::analyzers
