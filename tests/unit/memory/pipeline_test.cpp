#include "memory/pipeline.h"

#include <gtest/gtest.h>

#include "memory/pipeline_order.h"

namespace partrain::memory {
namespace {

// Narayanan 2021 sec. 2.2, the schedules of its Figure 4 (4 devices, 8 micro-batches): bubble
// (p-1)/m = 3/8; interleaved with v = 2 chunks: (p-1)/(vm) = 3/16.
TEST(Pipeline, BubbleFraction) {
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8), 0.375);
  EXPECT_DOUBLE_EQ(bubble_fraction(4, 8, 2), 0.1875);
  EXPECT_DOUBLE_EQ(bubble_fraction(1, 8), 0.0);
  // Narayanan 2021 sec. 2.2.1: the bubble is small when m >> p, e.g. m = 4p: (p-1)/(4p) < 25%.
  EXPECT_LT(bubble_fraction(8, 32), 0.25);
}

// Narayanan 2021 sec. 2.2.1: 1F1B keeps at most p micro-batches in flight on the first stage,
// one on the last; GPipe keeps all m.
TEST(Pipeline, OneFOneBAndGpipeInFlight) {
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kOneFOneB, 4, 1, 8, 0), 4);
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kOneFOneB, 4, 1, 8, 3), 1);
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kOneFOneB, 4, 1, 2, 0), 2);  // m < p
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kGpipe, 4, 1, 8, 3), 8);
}

// Korthikanti 2022 sec. 4.2.3: interleaving multiplies the first stage's memory by
// 1 + (p-1)/(pv).
TEST(Pipeline, InterleavedFirstStage) {
  for (int p : {2, 4, 8}) {
    for (int v : {2, 3, 4}) {
      const double expected = p * (1 + (p - 1.0) / (p * v));
      EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kInterleaved, p, v, 64, 0), expected)
          << "p " << p << " v " << v;
    }
  }
}

// The estimator's closed forms for the zero-bubble schedules are the peaks of their own compute
// orders (memory/pipeline_order.h), counted in micro-batches of a rank's layers.
TEST(Pipeline, ZeroBubbleInFlightIsThePeakOfTheOrder) {
  for (int pp = 2; pp <= 8; ++pp) {
    for (int64_t m = 1; m <= 3 * pp; ++m) {
      for (int stage = 0; stage < pp; ++stage) {
        const int zb =
            peak_chunk_activations(PipelineSchedule::kZbH1, pp, 1, static_cast<int>(m), stage);
        EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kZbH1, pp, 1, m, stage), zb)
            << "pp " << pp << " m " << m << " stage " << stage;
        if (m < 2 * pp) continue;
        const int v =
            peak_chunk_activations(PipelineSchedule::kDualPipeV, pp, 1, static_cast<int>(m), stage);
        EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kDualPipeV, pp, 1, m, stage),
                         v / 2.0)
            << "pp " << pp << " m " << m << " stage " << stage;
      }
    }
  }
  // The DualPipe README: PP + 1 stage activations a device, in stages of the two it holds.
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kDualPipe, 16, 1, 64, 3), 17.0 / 2);
  EXPECT_DOUBLE_EQ(in_flight_micro_batches(PipelineSchedule::kDualPipeV, 8, 1, 64, 3), 17.0 / 2);
}

// Qi 2023 sec. 3.1 with F = B = W (its Figure 3 setting): ZB-H1 idles a third of 1F1B's bubble;
// the DualPipe README's bubbles (F&B = F + B).
TEST(Pipeline, ZeroBubbleFractions) {
  EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::kZbH1, 4, 8, 1), bubble_fraction(4, 8) / 3);
  EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::kDualPipeV, 4, 8, 1), 3.0 / 24);
  EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::kDualPipe, 16, 32, 1), 14.0 / 96);
  EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::kOneFOneB, 4, 8, 1), 0.375);
  EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::kInterleaved, 4, 8, 2), 0.1875);
  // With a free W the split buys nothing: ZB-H1's bubble is 1F1B's (F + B)(p - 1).
  EXPECT_DOUBLE_EQ(split_bubble_fraction(PipelineSchedule::kZbH1, 4, 8, 1, 2, 0), 3.0 / 8);
  // W as long as F + B: no bubble left.
  EXPECT_DOUBLE_EQ(split_bubble_fraction(PipelineSchedule::kZbH1, 4, 8, 1, 1, 2), 0.0);
}

TEST(PipelineOrder, PlacesDualPipeVInAV) {
  EXPECT_EQ(pipeline_chunks(PipelineSchedule::kDualPipeV, 4, 1), 8);
  EXPECT_EQ(rank_chunks(PipelineSchedule::kDualPipeV, 4, 1, 1), (std::vector<int>{1, 6}));
  EXPECT_EQ(chunk_rank(PipelineSchedule::kDualPipeV, 4, 6), 1);
  EXPECT_EQ(rank_chunks(PipelineSchedule::kDualPipe, 4, 1, 3), (std::vector<int>{0, 3}));
  EXPECT_EQ(rank_chunks(PipelineSchedule::kInterleaved, 2, 3, 1), (std::vector<int>{1, 3, 5}));
  EXPECT_FALSE(pipeline_compute_order(PipelineSchedule::kDualPipe, 4, 1, 8, 0).is_ok());
}

}  // namespace
}  // namespace partrain::memory
