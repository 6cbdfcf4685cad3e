// The pipeline schedule simulation against timelines worked out by hand: p = 2 stages, m = 4
// micro-batches, forward F = 1 and backward B = 2 time units on every stage.
#include "analyzers/pipeline_simulation.h"

#include <gtest/gtest.h>

#include "memory/pipeline.h"

namespace partrain::analyzers {
namespace {

using memory::PipelineSchedule;

PipelineSimInput two_stages(PipelineSchedule schedule) {
  PipelineSimInput in;
  in.schedule = schedule;
  in.pp = 2;
  in.micro_batches = 4;
  in.forward = {1, 1};
  in.backward = {2, 2};
  return in;
}

double start_of(const PipelineSimulation& sim, int stage, bool forward, int micro_batch) {
  for (const SimulatedAction& a : sim.actions) {
    if (a.stage == stage && a.action.forward == forward && a.action.micro_batch == micro_batch) {
      return a.start;
    }
  }
  ADD_FAILURE() << "no action stage " << stage << " mb " << micro_batch;
  return -1;
}

TEST(PipelineStageActions, OneFOneBWarmsUpPMinusSMinusOneForwards) {
  using A = PipelineAction;
  EXPECT_EQ(pipeline_stage_actions(PipelineSchedule::kOneFOneB, 2, 1, 4, 0),
            (std::vector<A>{{true, 0, 0}, {true, 1, 0}, {false, 0, 0}, {true, 2, 0},
                            {false, 1, 0}, {true, 3, 0}, {false, 2, 0}, {false, 3, 0}}));
  EXPECT_EQ(pipeline_stage_actions(PipelineSchedule::kOneFOneB, 2, 1, 4, 1),
            (std::vector<A>{{true, 0, 1}, {false, 0, 1}, {true, 1, 1}, {false, 1, 1},
                            {true, 2, 1}, {false, 2, 1}, {true, 3, 1}, {false, 3, 1}}));
}

TEST(PipelineStageActions, InterleavedWalksChunksInGroupsOfPp) {
  // p = 2, v = 2, m = 2: stage 0 holds chunks 0 and 2; warm-up min(2(p-1) + (v-1)p, mv) = 4.
  using A = PipelineAction;
  EXPECT_EQ(pipeline_stage_actions(PipelineSchedule::kInterleaved, 2, 2, 2, 0),
            (std::vector<A>{{true, 0, 0}, {true, 1, 0}, {true, 0, 2}, {true, 1, 2},
                            {false, 0, 2}, {false, 1, 2}, {false, 0, 0}, {false, 1, 0}}));
}

// GPipe by hand:
//   stage 0: F0 [0,1) F1 [1,2) F2 [2,3) F3 [3,4)          B0 [7,9) B1 [9,11) B2 [11,13) B3 [13,15)
//   stage 1:   F0 [1,2) F1 [2,3) F2 [3,4) F3 [4,5) B0 [5,7) B1 [7,9) B2 [9,11) B3 [11,13)
// Step 15; each stage busy 4F + 4B = 12, bubble 3 = (p-1)(F+B).
// bubble/ideal = 3/12 = (p-1)/m; bubble/step = 3/15 = (p-1)/(m+p-1).
TEST(SimulatePipeline, GpipeByHand) {
  auto sim = simulate_pipeline(two_stages(PipelineSchedule::kGpipe));
  ASSERT_TRUE(sim.is_ok()) << sim.status().message();
  EXPECT_DOUBLE_EQ(sim->step_time, 15);
  for (int s = 0; s < 2; ++s) {
    EXPECT_DOUBLE_EQ(sim->busy[s], 12);
    EXPECT_DOUBLE_EQ(sim->bubble[s], 3);
    EXPECT_DOUBLE_EQ(sim->bubble_of_ideal(s), 0.25);
    EXPECT_DOUBLE_EQ(sim->bubble_of_step(s), 0.2);
  }
  EXPECT_DOUBLE_EQ(start_of(*sim, 1, true, 3), 4);
  EXPECT_DOUBLE_EQ(start_of(*sim, 1, false, 0), 5);
  EXPECT_DOUBLE_EQ(start_of(*sim, 0, false, 0), 7);
  EXPECT_DOUBLE_EQ(start_of(*sim, 0, false, 3), 13);
}

// 1F1B by hand (stage 0 warms up with one forward, stage 1 with none):
//   stage 0: F0 [0,1) F1 [1,2) . . B0 [4,6) F2 [6,7) B1 [7,9) F3 [9,10) B2 [10,12) . B3 [13,15)
//   stage 1: . F0 [1,2) B0 [2,4) F1 [4,5) B1 [5,7) F2 [7,8) B2 [8,10) F3 [10,11) B3 [11,13)
// Same step (15) and bubble (3 per stage) as GPipe; only the activations in flight differ.
TEST(SimulatePipeline, OneFOneBByHand) {
  auto sim = simulate_pipeline(two_stages(PipelineSchedule::kOneFOneB));
  ASSERT_TRUE(sim.is_ok()) << sim.status().message();
  EXPECT_DOUBLE_EQ(sim->step_time, 15);
  for (int s = 0; s < 2; ++s) EXPECT_DOUBLE_EQ(sim->bubble[s], 3);
  EXPECT_DOUBLE_EQ(start_of(*sim, 0, false, 0), 4);
  EXPECT_DOUBLE_EQ(start_of(*sim, 0, true, 2), 6);
  EXPECT_DOUBLE_EQ(start_of(*sim, 1, true, 1), 4);
  EXPECT_DOUBLE_EQ(start_of(*sim, 1, true, 3), 10);
  EXPECT_DOUBLE_EQ(start_of(*sim, 0, false, 3), 13);
}

// Interleaving v = 2 chunks of half the work (F = 0.5, B = 1 per chunk) shrinks the bubble to
// (p-1)(F+B)/v = 1.5 against an ideal of 12: (p-1)/(v m) = 1/8 (Narayanan 2021 sec. 2.2).
TEST(SimulatePipeline, InterleavedHalvesTheBubble) {
  PipelineSimInput in = two_stages(PipelineSchedule::kInterleaved);
  in.vpp = 2;
  in.forward = {0.5, 0.5};
  in.backward = {1, 1};
  auto sim = simulate_pipeline(in);
  ASSERT_TRUE(sim.is_ok()) << sim.status().message();
  for (int s = 0; s < 2; ++s) {
    EXPECT_DOUBLE_EQ(sim->busy[s], 12);
    EXPECT_DOUBLE_EQ(sim->bubble_of_ideal(s), 1.0 / 8);
  }
  EXPECT_DOUBLE_EQ(sim->step_time, 13.5);
}

// A transfer of 1 unit on every stage crossing adds two crossings to the critical path
// (F3 into stage 1, B3 back into stage 0):
//   stage 0: F0..F3 [0,4)                    B0 [9,11) B1 [11,13) B2 [13,15) B3 [15,17)
//   stage 1: F0 [2,3) F1 [3,4) F2 [4,5) F3 [5,6) B0 [6,8) B1 [8,10) B2 [10,12) B3 [12,14)
// Step 17, bubble 5 per stage.
TEST(SimulatePipeline, TransferDelaysEveryCrossing) {
  PipelineSimInput in = two_stages(PipelineSchedule::kGpipe);
  in.transfer = 1;
  auto sim = simulate_pipeline(in);
  ASSERT_TRUE(sim.is_ok()) << sim.status().message();
  EXPECT_DOUBLE_EQ(sim->step_time, 17);
  EXPECT_DOUBLE_EQ(sim->bubble[0], 5);
  EXPECT_DOUBLE_EQ(sim->bubble[1], 5);
  EXPECT_DOUBLE_EQ(start_of(*sim, 1, true, 0), 2);
  EXPECT_DOUBLE_EQ(start_of(*sim, 0, false, 0), 9);
}

// A slow last stage sets the pace: stage 1 takes F = 2, B = 4 (stage 0 keeps 1 and 2).
// 1F1B: stage 1 runs back to back from t = 1 (4 x 6 = 24) to 25, then stage 0's last backward
// (needs stage 1's B3 at 25) ends at 27: step 27, stage 0 bubble 27 - 12 = 15, stage 1 27 - 24 = 3.
TEST(SimulatePipeline, SlowStageSetsThePace) {
  PipelineSimInput in = two_stages(PipelineSchedule::kOneFOneB);
  in.forward = {1, 2};
  in.backward = {2, 4};
  auto sim = simulate_pipeline(in);
  ASSERT_TRUE(sim.is_ok()) << sim.status().message();
  EXPECT_DOUBLE_EQ(sim->step_time, 27);
  EXPECT_DOUBLE_EQ(sim->bubble[0], 15);
  EXPECT_DOUBLE_EQ(sim->bubble[1], 3);
}

TEST(SimulatePipeline, RejectsImpossibleShapes) {
  PipelineSimInput in = two_stages(PipelineSchedule::kInterleaved);
  in.vpp = 2;
  in.micro_batches = 3;  // not a multiple of pp
  EXPECT_FALSE(simulate_pipeline(in).is_ok());
  in = two_stages(PipelineSchedule::kGpipe);
  in.forward = {1};
  EXPECT_FALSE(simulate_pipeline(in).is_ok());
}

// The zero-bubble schedules, from memory::pipeline_compute_order, over a grid of p and m: every
// list completes (no stage waits forever) and every stage does all of its work.
TEST(SimulatePipeline, ZeroBubbleSchedulesCompleteOnEveryShape) {
  for (PipelineSchedule schedule : {PipelineSchedule::kZbH1, PipelineSchedule::kDualPipeV}) {
    for (int pp = 2; pp <= 8; ++pp) {
      for (int m = 1; m <= 4 * pp + 1; ++m) {
        if (schedule == PipelineSchedule::kDualPipeV && m < 2 * pp) continue;
        PipelineSimInput in;
        in.schedule = schedule;
        in.pp = pp;
        in.micro_batches = m;
        in.forward.assign(static_cast<size_t>(pp), 1);
        in.backward.assign(static_cast<size_t>(pp), 1);
        in.weight.assign(static_cast<size_t>(pp), 1);
        auto sim = simulate_pipeline(in);
        ASSERT_TRUE(sim.is_ok()) << memory::schedule_name(schedule) << " pp " << pp << " m " << m
                                 << ": " << sim.status().message();
        const double chunks = schedule == PipelineSchedule::kDualPipeV ? 2 : 1;
        for (int s = 0; s < pp; ++s)
          EXPECT_DOUBLE_EQ(sim->busy[static_cast<size_t>(s)], 3 * m * chunks);
      }
    }
  }
}

// Qi 2023 sec. 3.1: ZB-H1 idles (p - 1)(F + B - W) per stage, 1F1B (p - 1)(F + B + W) when its
// backward is the same B + W; here F = 2, B = 2, W = 1 over p = 4, m = 8.
TEST(SimulatePipeline, ZbH1IdlesWhatQiPredicts) {
  PipelineSimInput in;
  in.schedule = PipelineSchedule::kZbH1;
  in.pp = 4;
  in.micro_batches = 8;
  in.forward = {2, 2, 2, 2};
  in.backward = {2, 2, 2, 2};
  in.weight = {1, 1, 1, 1};
  auto zb = simulate_pipeline(in);
  ASSERT_TRUE(zb.is_ok()) << zb.status().message();
  in.schedule = PipelineSchedule::kOneFOneB;
  in.backward = {3, 3, 3, 3};
  in.weight.clear();
  auto one = simulate_pipeline(in);
  ASSERT_TRUE(one.is_ok());
  for (int s = 0; s < 4; ++s) {
    EXPECT_DOUBLE_EQ(zb->bubble[static_cast<size_t>(s)], 3 * (2 + 2 - 1)) << "stage " << s;
    EXPECT_DOUBLE_EQ(one->bubble[static_cast<size_t>(s)], 3 * (2 + 3)) << "stage " << s;
    EXPECT_NEAR(zb->bubble_of_ideal(s),
                memory::split_bubble_fraction(PipelineSchedule::kZbH1, 4, 8, 2, 2, 1), 1e-12);
  }
}

// DualPipeV over p = 4 ranks (8 stages of half a rank's layers each): its bubble stays within
// the DualPipe README's (PP/2 - 1)(F&B + B_full - 3W), taken with F&B = F + B_full since the
// pair runs one after the other here, and below ZB-H1's on the same work per rank.
TEST(SimulatePipeline, DualPipeVStaysWithinTheReadmeBound) {
  for (double w : {0.5, 1.0, 2.0}) {
    PipelineSimInput in;
    in.schedule = PipelineSchedule::kDualPipeV;
    in.pp = 4;
    in.micro_batches = 12;
    in.forward.assign(4, 1);  // per chunk: half a rank's layers
    in.backward.assign(4, 1);
    in.weight.assign(4, w);
    auto v = simulate_pipeline(in);
    ASSERT_TRUE(v.is_ok()) << v.status().message();
    in.schedule = PipelineSchedule::kZbH1;
    in.forward.assign(4, 2);  // the same rank's layers as one stage
    in.backward.assign(4, 2);
    in.weight.assign(4, 2 * w);
    auto zb = simulate_pipeline(in);
    ASSERT_TRUE(zb.is_ok());
    const double bound =
        memory::split_bubble_fraction(PipelineSchedule::kDualPipeV, 4, 12, 1, 1, w);
    for (int s = 0; s < 4; ++s) {
      EXPECT_LE(v->bubble_of_ideal(s), bound + 1e-12) << "W " << w << " stage " << s;
      EXPECT_LT(v->bubble[static_cast<size_t>(s)], zb->bubble[static_cast<size_t>(s)])
          << "W " << w << " stage " << s;
    }
  }
}

TEST(SimulatePipeline, RefusesWhatTheScheduleCannotRun) {
  PipelineSimInput in = two_stages(PipelineSchedule::kDualPipeV);
  in.micro_batches = 3;  // < 2 pp
  EXPECT_FALSE(simulate_pipeline(in).is_ok());
  in = two_stages(PipelineSchedule::kDualPipe);
  auto dual = simulate_pipeline(in);
  ASSERT_FALSE(dual.is_ok());
  EXPECT_NE(dual.status().message().find("dualpipev"), std::string::npos);
}

}  // namespace
}  // namespace partrain::analyzers
