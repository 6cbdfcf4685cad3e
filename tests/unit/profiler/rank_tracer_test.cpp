// RankTracer and TraceScope: what a rank records lands in the node's file on the run-wide
// timeline (local time + the fitted clock offset), tagged with the current step, on the calling
// thread's track; a TraceScope records only on the tracer it is given.
#include "profiler/rank_tracer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "core/clock.h"
#include "profiler/trace_open.h"
#include "profiler/trace_reader/expert_reads.h"
#include "profiler/trace_scope.h"
#include "profiler/trace_session.h"
#include "tests/support/rank_tracer_fixture.h"
#include "tests/support/trace_query.h"

namespace partrain::profiler {
namespace {
namespace fs = std::filesystem;

std::string rows(const fs::path& db, const std::string& sql) {
  return testing::TraceQuery(db).rows(sql);
}

using RankTracerTest = testing::RankTracerFixture;

TEST_F(RankTracerTest, EventsLandOnTheTimelineWithStepAndTrack) {
  int64_t collective_ts = 0;
  {
    RankTracer tracer(tracer_options(3));
    // Offset 1000 ns at local 0, drifting 10 ppm: at local 1e9 the offset is 11000 ns.
    ClockDrift drift;
    drift.reference_local_ns = 0;
    drift.offset_at_reference_ns = 1000;
    drift.drift_ppm = 10;
    drift.observations = 2;
    tracer.set_clock(drift);
    EXPECT_EQ(tracer.timeline_ns(1'000'000'000), 1'000'011'000);
    tracer.set_step(7);
    tracer.slice("block.forward", SliceCategory::kCompute, 1'000'000'000, 1'000'000'500, 2, 1);
    std::thread([&] {
      tracer.slice("loader", SliceCategory::kCompute, 0, 100);
    }).join();
    CollectiveEvent event;
    event.comm_id = "world";
    event.seq = 4;
    event.op = "all_reduce";
    event.dtype = "float";
    event.reduce_op = "sum";
    event.count = 8;
    event.bytes = 32;
    event.group_ranks = {0, 1, 2, 3};
    event.rank = 3;
    // Issued in step 7 (the step is looked up by when the call was made, local monotonic ns).
    event.start_ns = monotonic_ns();
    event.enqueue_ns = event.start_ns - 10;
    event.end_ns = event.start_ns + 20;
    event.state = CollectiveState::kCompleted;
    collective_ts = tracer.timeline_ns(event.start_ns);
    tracer.collective(event);
    tracer.memory(1, 0, 4096);
    tracer.step_done(7, 0, 2'000, 2.5, 64);
    EXPECT_TRUE(tracer.flush());
  }
  ASSERT_TRUE(session_->finish(RunStatus::kCompleted).is_ok());
  EXPECT_EQ(rows(db(), "SELECT rank, track, name, ts_ns, dur_ns, step, micro_batch, layer "
                       "FROM slices WHERE name = 'block.forward'"),
            "3|main|block.forward|1000011000|500|7|1|2\n");
  // Another thread's slice goes to a track of its own.
  EXPECT_EQ(rows(db(), "SELECT track LIKE 'thread %', ts_ns, dur_ns FROM slices "
                       "WHERE name = 'loader'"),
            "1|1000|100\n");
  EXPECT_EQ(rows(db(), "SELECT rank, comm_id, seq, op, bytes, ts_ns, dur_ns, step, group_ranks "
                       "FROM collectives"),
            fmt::format("3|world|4|all_reduce|32|{}|20|7|0,1,2,3\n", collective_ts));
  EXPECT_EQ(rows(db(), "SELECT rank, ts_ns, category, bytes FROM memory_events"),
            "3|1000|grads|4096\n");
  EXPECT_EQ(rows(db(), "SELECT rank, step, ts_ns, dur_ns, loss, tokens FROM steps"),
            "3|7|1000|2000|2.5|64\n");
}

// A worker torchrun restarted (TORCHELASTIC_RESTART_COUNT 2) records its steps under attempt 2:
// the attempt travels with each step record through the collector into `step.attempt`.
TEST_F(RankTracerTest, StepsCarryTheWorkersTorchrunAttempt) {
  ::setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
  RankTracerOptions restarted = tracer_options(1);
  ::unsetenv("TORCHELASTIC_RESTART_COUNT");
  EXPECT_EQ(restarted.attempt, 2);
  EXPECT_EQ(tracer_options(0).attempt, 0);
  {
    RankTracer first(tracer_options(0));
    RankTracer again(std::move(restarted));
    first.step_done(0, 0, 1'000, 2.5, 64);
    again.step_done(0, 5'000, 6'000, 2.4, 64);
    EXPECT_TRUE(first.flush());
    EXPECT_TRUE(again.flush());
  }
  ASSERT_TRUE(session_->finish(RunStatus::kCompleted).is_ok());
  EXPECT_EQ(rows(db(), "SELECT rank, step, attempt FROM steps ORDER BY rank"), "0|0|0\n1|0|2\n");
}

// What is written after the fact (an NCCL call once its kernels are known, a GPU record) carries
// the step the rank was in when it happened, not the one it is in when written.
TEST_F(RankTracerTest, LateRecordsCarryTheStepTheyHappenedIn) {
  RankTracer tracer(tracer_options(1));
  EXPECT_EQ(tracer.step_at(monotonic_ns()), -1);  // no step yet
  tracer.set_step(0);
  const int64_t in_step_0 = monotonic_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  tracer.set_step(1);
  const int64_t in_step_1 = monotonic_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  tracer.set_step(-1);
  EXPECT_EQ(tracer.step(), -1);
  EXPECT_EQ(tracer.step_at(in_step_0), 0);
  EXPECT_EQ(tracer.step_at(in_step_1), 1);
  EXPECT_EQ(tracer.step_at(monotonic_ns()), -1);
  EXPECT_EQ(tracer.step_at(in_step_0 - 1'000'000'000), -1);  // before the first step
  for (size_t i = 0; i < RankTracer::kStepHistory; ++i) tracer.set_step(2);
  EXPECT_EQ(tracer.step_at(in_step_1), -1);  // older than the history kept
  EXPECT_EQ(tracer.step_at(monotonic_ns()), 2);
}

TEST_F(RankTracerTest, TraceScopeRecordsOnlyOnTheTracerItIsGiven) {
  {
    profiler::TraceScope untraced(nullptr, "before", SliceCategory::kPhase);
  }
  {
    RankTracer tracer(tracer_options(0));
    {
      TraceScope scope(&tracer, "optimizer", SliceCategory::kPhase);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    { TraceScope after(nullptr, "after", SliceCategory::kPhase); }
    EXPECT_TRUE(tracer.flush());
  }
  ASSERT_TRUE(session_->finish(RunStatus::kCompleted).is_ok());
  EXPECT_EQ(rows(db(), "SELECT name, category, dur_ns >= 2000000 FROM slices"),
            "optimizer|phase|1\n");
}

// The workload's per-step routing counts travel as other records do (recorder, collector,
// writer) and read back through the views and the reader, one row per (rank, step, layer).
TEST_F(RankTracerTest, ExpertLoadsReachTheTraceAndReadBack) {
  {
    RankTracer rank0(tracer_options(0));
    RankTracer rank1(tracer_options(1));
    const std::vector<int64_t> step2 = {5, 0, 9, 2};
    rank0.expert_load(2, 1, step2, 3, 0.25);
    rank1.expert_load(2, 1, step2, 3, 0.25);  // the same global counts on the other rank
    const std::vector<int64_t> step3 = {4, 4, 4, 4};
    rank0.expert_load(3, 1, step3, 0, std::nan(""));
    rank1.expert_load(3, 5, std::vector<int64_t>{1, 2}, 0, 0.5);  // a layer of another stage
    EXPECT_TRUE(rank0.flush());
    EXPECT_TRUE(rank1.flush());
  }
  ASSERT_TRUE(session_->finish(RunStatus::kCompleted).is_ok());
  EXPECT_EQ(rows(db(),
                 "SELECT rank, step, layer, experts, routed_tokens, dropped_tokens, "
                 "aux_loss FROM expert_layers ORDER BY rank, step, layer"),
            "0|2|1|4|16|3|0.25\n0|3|1|4|16|0|NULL\n1|2|1|4|16|3|0.25\n1|3|5|2|3|0|0.5\n");
  EXPECT_EQ(rows(db(),
                 "SELECT expert, tokens FROM expert_loads WHERE rank = 0 AND step = 2 "
                 "ORDER BY expert"),
            "0|5\n1|0\n2|9\n3|2\n");

  auto trace = open_trace(db());
  ASSERT_TRUE(trace.is_ok()) << trace.status().message();
  const TraceReader reader(trace->db);
  auto sources = expert_layer_sources(reader, StepFilter{0, 0, true});
  ASSERT_TRUE(sources.is_ok()) << sources.status().message();
  ASSERT_EQ(sources->size(), 2u);
  EXPECT_EQ((*sources)[0].layer, 1);
  EXPECT_EQ((*sources)[0].rank, 0);
  EXPECT_EQ((*sources)[0].ranks, 2);
  EXPECT_EQ((*sources)[1].layer, 5);
  EXPECT_EQ((*sources)[1].rank, 1);
  auto cursor = expert_loads(reader, 0, 1, StepFilter{3, 3, false});
  ASSERT_TRUE(cursor.is_ok());
  ExpertLoadRow row;
  ASSERT_TRUE(cursor->next(row));
  EXPECT_EQ(row.step, 3);
  EXPECT_EQ(row.tokens_per_expert, (std::vector<int64_t>{4, 4, 4, 4}));
  EXPECT_FALSE(row.aux_loss.has_value());  // NaN: not computed
  EXPECT_FALSE(cursor->next(row));
  EXPECT_TRUE(cursor->status().is_ok());
}

TEST(RankTracerEnv, NotTracedWithoutACollector) {
  ::unsetenv(std::string(kCollectorEnv).c_str());
  EXPECT_EQ(RankTracer::from_env(0), nullptr);
}

}  // namespace
}  // namespace partrain::profiler
