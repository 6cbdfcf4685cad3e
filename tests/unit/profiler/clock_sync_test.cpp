// Clock-offset estimation from synthetic pings with a known offset, and drift fitting with a
// known drift at realistic (large) monotonic timestamps.
#include "profiler/clock_sync.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace partrain::profiler {
namespace {

// A server whose clock reads local + offset; each ping spends `out` ns going and `back` ns
// returning, and the server reads its clock on arrival.
PingSample ping_at(int64_t local_send_ns, int64_t offset_ns, int64_t out_ns, int64_t back_ns) {
  return PingSample{local_send_ns, local_send_ns + out_ns + offset_ns,
                    local_send_ns + out_ns + back_ns};
}

TEST(ClockSync, MinRoundTripSampleGivesTheOffset) {
  const int64_t offset = -3'217'554'001;  // server is ~3.2 s behind
  std::vector<PingSample> samples = {
      ping_at(1'000'000'000, offset, 900'000, 100'000),  // slow, asymmetric: biased estimate
      ping_at(1'010'000'000, offset, 40'000, 40'000),    // fastest, symmetric: exact
      ping_at(1'020'000'000, offset, 10'000, 300'000),
  };
  auto estimate = estimate_clock_offset(samples);
  ASSERT_TRUE(estimate.has_value());
  EXPECT_EQ(estimate->offset_ns, offset);
  EXPECT_EQ(estimate->uncertainty_ns, 40'000);
  EXPECT_EQ(estimate->samples, 3u);
}

TEST(ClockSync, TrueOffsetLiesWithinTheUncertainty) {
  const int64_t offset = 123'456'789;
  uint64_t lcg = 12345;
  auto next_delay = [&] {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>((lcg >> 33) % 500'000) + 5'000;
  };
  std::vector<PingSample> samples;
  for (int i = 0; i < 32; ++i) {
    const int64_t out = next_delay();
    samples.push_back(ping_at(5'000'000'000'000 + i * 1'000'000, offset, out, next_delay()));
  }
  auto estimate = estimate_clock_offset(samples);
  ASSERT_TRUE(estimate.has_value());
  EXPECT_LE(std::llabs(estimate->offset_ns - offset), estimate->uncertainty_ns + 1);
  EXPECT_LT(estimate->uncertainty_ns, 500'000);
}

TEST(ClockSync, InvalidSamplesAreSkipped) {
  EXPECT_FALSE(estimate_clock_offset({}).has_value());
  std::vector<PingSample> backwards = {{100, 50, 90}};
  EXPECT_FALSE(estimate_clock_offset(backwards).has_value());
  // A backwards sample with a "negative" round trip must not win the min-RTT choice.
  std::vector<PingSample> mixed = {{100, 50, 90}, ping_at(1000, 7, 10, 10)};
  auto estimate = estimate_clock_offset(mixed);
  ASSERT_TRUE(estimate.has_value());
  EXPECT_EQ(estimate->offset_ns, 7);
  EXPECT_EQ(estimate->samples, 1u);
}

TEST(ClockSync, DriftFitRecoversKnownDriftAtLargeTimestamps) {
  // Ten minutes of observations on a host that has been up ~11 days (t ~ 1e15 ns).
  const int64_t start = 987'654'321'000'000;
  const double drift_ppm = 25.0;  // server gains 25 us per second
  const int64_t offset_at_start = -4'000'000'000;
  std::vector<OffsetObservation> observations;
  for (int i = 0; i <= 60; ++i) {
    const int64_t t = start + int64_t{i} * 10'000'000'000;
    const double jitter = (i % 3 - 1) * 200.0;  // +-200 ns measurement noise, mean zero
    observations.push_back(
        {t, offset_at_start + static_cast<int64_t>(drift_ppm * 1e-6 * double(t - start) + jitter)});
  }
  auto fit = fit_clock_drift(observations);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->observations, 61u);
  EXPECT_NEAR(fit->drift_ppm, drift_ppm, 0.001);
  EXPECT_NEAR(static_cast<double>(fit->offset_at(start)), double(offset_at_start), 500.0);
  const int64_t later = start + 3'600'000'000'000;  // extrapolate to one hour
  EXPECT_NEAR(static_cast<double>(fit->offset_at(later)),
              double(offset_at_start) + drift_ppm * 3600e3, 5'000.0);
}

TEST(ClockSync, DriftFitWithoutSpreadInTimeHasNoDrift) {
  EXPECT_FALSE(fit_clock_drift({}).has_value());
  std::vector<OffsetObservation> single = {{1'000, 500}};
  auto fit = fit_clock_drift(single);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->drift_ppm, 0.0);
  EXPECT_EQ(fit->offset_at(1'000'000'000), 500);
  std::vector<OffsetObservation> same_instant = {{1'000, 400}, {1'000, 600}};
  fit = fit_clock_drift(same_instant);
  ASSERT_TRUE(fit.has_value());
  EXPECT_EQ(fit->drift_ppm, 0.0);
  EXPECT_EQ(fit->offset_at(5'000), 500);
}

}  // namespace
}  // namespace partrain::profiler
