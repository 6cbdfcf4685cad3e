// The end-of-run summary as printed: no share of a peak above 100% (the peak becomes the run's
// own rate when the run beat it, and the text says so), a line per rank for step times, and the
// JSON with the same facts.
#include "runner/workload/run_summary.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace partrain::runner {
namespace {

// Two ranks, 1 GFLOP per step in 20 ms: 25 GFLOP/s per rank, against a peak measured at 10
// (taken while other ranks started): the summary printed MFU 250.0% and "288% of the sgemm peak".
RunSummary faster_than_its_peak() {
  RunSummary s;
  s.world = 2;
  s.losses = {2.0, 1.5, 1.0};
  s.step_seconds = {1.0, 0.02, 0.02};
  s.rank_step_seconds = {{0.02, 0.021}, {0.0225, 0.03}};
  s.tokens_per_step = 1000;
  s.model_flops_per_step = 1e9;
  s.peak_flops_per_rank = 10e9;
  s.peak_source = "measured sgemm, 512^3";
  s.gemm_seconds = 0.01;
  s.gemm_flops = 0.3e9;  // 30 GFLOP/s achieved
  return s;
}

TEST(RunSummaryTest, APeakTheRunBeatIsRaisedToTheRunsRateAndSaid) {
  RunSummary s = faster_than_its_peak();
  ASSERT_GT(s.mfu(), 1.0);  // the figure before settling
  settle_peak(s);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_rank, 30e9);  // the GEMMs' rate, the fastest
  EXPECT_DOUBLE_EQ(s.peak_raised_from, 10e9);
  EXPECT_LE(s.mfu(), 1.0);
  EXPECT_NEAR(s.mfu(), 25.0 / 30.0, 1e-12);
  const std::string text = format_summary_text(s);
  EXPECT_NE(text.find("MFU 83.3% of 30.0 GFLOP/s per rank (the run's own fastest rate: it beat "
                      "the measured sgemm, 512^3 peak of 10.0 GFLOP/s)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("= 100% of the peak"), std::string::npos) << text;
  const nlohmann::json json = nlohmann::json::parse(format_summary_json(s));
  EXPECT_DOUBLE_EQ(json["peak_raised_from_flops_per_rank"].get<double>(), 10e9);
  EXPECT_DOUBLE_EQ(json["peak_flops_per_rank"].get<double>(), 30e9);
  EXPECT_DOUBLE_EQ(json["mfu"].get<double>(), s.mfu());
}

TEST(RunSummaryTest, APeakAboveTheRunStaysAsMeasured) {
  RunSummary s = faster_than_its_peak();
  s.peak_flops_per_rank = 100e9;
  settle_peak(s);
  EXPECT_DOUBLE_EQ(s.peak_flops_per_rank, 100e9);
  EXPECT_EQ(s.peak_raised_from, 0);
  EXPECT_EQ(format_summary_text(s).find("beat"), std::string::npos);
  EXPECT_TRUE(
      nlohmann::json::parse(format_summary_json(s))["peak_raised_from_flops_per_rank"].is_null());
}

// Each rank's median and p90 on a line of its own (they ran together on one line).
TEST(RunSummaryTest, StepTimesALinePerRank) {
  const std::string text = format_summary_text(faster_than_its_peak());
  EXPECT_NE(text.find("step time per rank:  rank      median         p90\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("                        0     20.0 ms     21.0 ms\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("                        1     22.5 ms     30.0 ms\n"), std::string::npos)
      << text;
}

// The summary's step times are analyze's for the same steps (docs/analysis.md, "Step time"):
// the p90 the ⌈0.9 n⌉-th smallest and the median the mean of the middle two, the warm-up step left
// out. Nine steps after warm-up gave the 8th smallest as p90 (analyze: the 9th, the largest), and
// four gave the upper middle step as median.
TEST(RunSummaryTest, StepTimesAreAnalyzesNearestRankP90AndMedian) {
  RunSummary s;
  s.step_seconds = {5.0, 0.009, 0.001, 0.008, 0.002, 0.007, 0.003, 0.006, 0.004, 0.005};
  EXPECT_DOUBLE_EQ(s.step_time_p90(), 0.009);
  EXPECT_DOUBLE_EQ(s.step_time_median(), 0.005);
  s.step_seconds = {5.0, 0.004, 0.001, 0.003, 0.002};
  EXPECT_DOUBLE_EQ(s.step_time_median(), 0.0025);
  EXPECT_DOUBLE_EQ(s.step_time_p90(), 0.004);
}

}  // namespace
}  // namespace partrain::runner
