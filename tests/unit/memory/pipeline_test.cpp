#include "memory/pipeline.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace partrain::memory
