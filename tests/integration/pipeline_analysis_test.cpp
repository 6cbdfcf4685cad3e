// The pipeline and memory analyses on real runs: `partrain launch` trains the gpt workload over
// pp = 2 stages with m = 4 micro-batches under GPipe, 1F1B, ZB-H1 and DualPipeV, and the library
// reads the traces.
//
// Tolerance: both ranks share a small, busy machine (2 cores, other tests beside this one). The
// model is sized so that each forward/backward action takes 25-45 ms, well above a p2p hop and
// the scheduler's preemptions, which the simulation (fed with the measured mean forward/backward
// times, median stage-crossing delay and median gap between actions) cannot foresee. Measured
// here under load: within 2-8 points (share of the flush) of the simulation. The test allows
// 15 points either way. (With a tiny model of ~1 ms actions the measured bubble ran 15-40 points
// above the simulation: noise of the same size as the work.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "analyzers/analysis_window.h"
#include "analyzers/memory_vs_estimate.h"
#include "analyzers/pipeline_bubble.h"
#include "memory/pipeline.h"
#include "profiler/trace_open.h"
#include "tests/integration/command_runner.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;
using analyzers::PipelineBubbleReport;

constexpr double kBelowSimulation = 0.15;
constexpr double kAboveSimulation = 0.15;
// DualPipeV runs 24 actions a step per rank here (twice 1F1B's 8 and more than ZB-H1's 12), each
// a chance for the scheduler to preempt a rank the simulation cannot see: alone it measured within
// 8 points of the simulation, under the default suite's -j2 load up to 19 points over it.
constexpr double kAboveSimulationDualPipeV = 0.25;

class PipelineAnalysis : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) /
                        fmt::format("pipeline_analysis_{}", getpid()));
    fs::create_directories(*dir_);
    for (const char* schedule : {"gpipe", "1f1b", "zb-h1", "dualpipev"}) {
      // DualPipeV cuts each rank's layers in two chunks: 8 layers keep its actions as long as
      // the others' (2 layers each). The split schedules run three passes a chunk and a short W:
      // sequences twice as long keep their actions (W too) above the machine's noise.
      const std::string name = schedule;
      const int layers = name == "dualpipev" ? 8 : 4;
      const int seq = name == "zb-h1" || name == "dualpipev" ? 128 : 64;
      CommandResult r = run_partrain(fmt::format(
          "-q launch -n 2 --workload gpt --layers {} --hidden 256 --heads 8 --seq {} --vocab 256 "
          "--pp 2 --micro-batch 2 --global-batch 8 --pp-schedule {} --steps 4 --trace {}",
          layers, seq, schedule, (*dir_ / fmt::format("{}.db", schedule)).string()));
      ASSERT_EQ(r.exit_code, 0) << schedule << "\n" << r.err;
    }
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  static profiler::TraceFile open(const char* schedule) {
    auto trace = profiler::open_trace(*dir_ / fmt::format("{}.db", schedule));
    EXPECT_TRUE(trace.is_ok()) << trace.status().message();
    return std::move(trace).value();
  }
  static analyzers::AnalysisWindow window(const profiler::TraceFile& trace) {
    auto w = analyzers::choose_window(trace.db, analyzers::WindowOptions{});  // skips step 0
    EXPECT_TRUE(w.is_ok()) << w.status().message();
    return std::move(w).value();
  }

  static fs::path* dir_;
};

fs::path* PipelineAnalysis::dir_ = nullptr;

void expect_near_simulation(const char* schedule, const PipelineBubbleReport& report) {
  ASSERT_TRUE(report.applicable) << report.reason;
  EXPECT_EQ(report.pp, 2);
  EXPECT_EQ(report.micro_batches, 4);
  ASSERT_EQ(report.stages.size(), 2u);
  if (!memory::splits_backward(report.schedule)) {
    EXPECT_DOUBLE_EQ(report.theory_bubble_of_ideal, 0.25);  // (p-1)/m
  } else {
    // Qi 2023 / the DualPipe README with the run's own mean F, B and W.
    double F = 0, B = 0, W = 0;
    for (const analyzers::StageBubble& st : report.stages) {
      EXPECT_GT(st.weight_ns, 0) << schedule << " stage " << st.stage;
      F += st.forward_ns / 2;
      B += st.backward_ns / 2;
      W += st.weight_ns / 2;
    }
    EXPECT_NEAR(report.theory_bubble_of_ideal,
                memory::split_bubble_fraction(report.schedule, 2, 4, F, B, W), 1e-12);
    // Weight passes fill the bubble: below 1F1B's (p-1)/m with any W > 0.
    EXPECT_LT(report.theory_bubble_of_ideal, 0.25) << schedule;
  }
  for (const analyzers::StageBubble& st : report.stages) {
    EXPECT_GT(st.forward_ns, 0);
    EXPECT_GT(st.backward_ns, 0);
    EXPECT_GE(st.bubble_of_flush, st.simulated_bubble_of_flush - kBelowSimulation)
        << schedule << " stage " << st.stage << "\n" << format_pipeline_bubble(report);
    const double above = report.schedule == memory::PipelineSchedule::kDualPipeV
                             ? kAboveSimulationDualPipeV
                             : kAboveSimulation;
    EXPECT_LE(st.bubble_of_flush, st.simulated_bubble_of_flush + above)
        << schedule << " stage " << st.stage << "\n"
        << format_pipeline_bubble(report);
  }
  std::cerr << format_pipeline_bubble(report);
}

TEST_F(PipelineAnalysis, MeasuredBubbleNearSimulation) {
  for (const char* schedule : {"gpipe", "1f1b", "zb-h1", "dualpipev"}) {
    profiler::TraceFile trace = open(schedule);
    auto report = analyzers::analyze_pipeline_bubble(trace.db, window(trace));
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    expect_near_simulation(schedule, *report);
  }
}

TEST_F(PipelineAnalysis, GpipeHoldsMoreActivationsThanOneFOneB) {
  double peak[2] = {0, 0};
  const char* schedules[2] = {"gpipe", "1f1b"};
  for (int i = 0; i < 2; ++i) {
    profiler::TraceFile trace = open(schedules[i]);
    auto report = analyzers::analyze_memory_vs_estimate(trace.db, window(trace));
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    ASSERT_TRUE(report->has_estimate) << report->estimate_note;
    for (const auto& c : report->ranks.at(0).categories) {
      if (c.category == memory::Category::kActivations) peak[i] = c.peak_bytes;
    }
    std::cerr << format_memory_vs_estimate(*report);
  }
  // Stage 0 holds all m = 4 micro-batches under GPipe, p = 2 under 1F1B.
  EXPECT_GT(peak[0], 1.5 * peak[1]) << "gpipe " << peak[0] << " vs 1f1b " << peak[1];
}

// The estimator's activations for the zero-bubble schedules (memory/pipeline.h: ZB-H1 min(p, m)
// micro-batches on every stage, DualPipeV 2p + 1 chunks) against the traced peaks, every rank.
// Measured here (memory accounting, not timing: the same every run): +3% to +5%, and -9.6% on
// ZB-H1's last stage, where B frees most of a micro-batch's activations and the estimate keeps
// them all until its W.
TEST_F(PipelineAnalysis, ZeroBubbleActivationsMatchTheEstimate) {
  for (const char* schedule : {"zb-h1", "dualpipev"}) {
    profiler::TraceFile trace = open(schedule);
    auto report = analyzers::analyze_memory_vs_estimate(trace.db, window(trace));
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    ASSERT_TRUE(report->has_estimate) << report->estimate_note;
    ASSERT_EQ(report->ranks.size(), 2u);
    for (const analyzers::RankMemory& rank : report->ranks) {
      for (const auto& c : rank.categories) {
        if (c.category != memory::Category::kActivations) continue;
        ASSERT_TRUE(c.error_pct().has_value()) << schedule;
        EXPECT_LT(std::abs(*c.error_pct()), 10.0) << schedule << "\n"
                                                  << format_memory_vs_estimate(*report);
      }
    }
    std::cerr << format_memory_vs_estimate(*report);
  }
}

}  // namespace
}  // namespace partrain::testing
