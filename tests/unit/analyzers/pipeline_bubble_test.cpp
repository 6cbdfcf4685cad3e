// The measured pipeline bubble on a hand-written GPipe trace: p = 2, m = 4, forward 1 ms and
// backward 2 ms on both stages, laid out exactly as the schedule runs them, so measured,
// simulated and theoretical bubbles agree and every number can be checked by hand.
#include "analyzers/pipeline_bubble.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/unit/analyzers/workload_trace_fixture.h"

namespace partrain::analyzers {
namespace {

using namespace testing;

// Step 2 on both ranks spans [100, 120) ms; the flush starts at 101 ms:
//   stage 0: F [101,102) [102,103) [103,104) [104,105)            B [108,110) ... [114,116)
//   stage 1:  F [102,103) ... [105,106)  B [106,108) [108,110) [110,112) [112,114)
// Flush [101, 116) = 15 ms; busy 4 x 1 + 4 x 2 = 12 ms per stage; bubble 3 ms:
// 3/15 = 20% of the flush (= (p-1)/(m+p-1)), 3/12 = 25% of ideal (= (p-1)/m), 3/20 = 15% of step.
std::vector<profiler::TraceEvent> gpipe_step(double t0) {
  std::vector<profiler::TraceEvent> events;
  for (int rank = 0; rank < 2; ++rank) events.push_back(step_event(rank, 2, t0, t0 + 20));
  for (int mb = 0; mb < 4; ++mb) {
    events.push_back(phase(0, "forward", t0 + 1 + mb, t0 + 2 + mb, mb));
    events.push_back(phase(1, "forward", t0 + 2 + mb, t0 + 3 + mb, mb));
    events.push_back(phase(1, "backward", t0 + 6 + 2 * mb, t0 + 8 + 2 * mb, mb));
    events.push_back(phase(0, "backward", t0 + 8 + 2 * mb, t0 + 10 + 2 * mb, mb));
  }
  return events;
}

class PipelineBubbleTest : public WorkloadTraceTest {};

TEST_F(PipelineBubbleTest, GpipeByHand) {
  auto trace = write_trace(gpt_config(2, 2, "gpipe", 4), 2, gpipe_step(100));
  auto report = analyze_pipeline_bubble(trace.db, window_of(2, 2, 2, 100, 120));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  ASSERT_TRUE(report->applicable) << report->reason;
  EXPECT_EQ(report->pp, 2);
  EXPECT_EQ(report->micro_batches, 4);
  EXPECT_DOUBLE_EQ(report->theory_bubble_of_ideal, 0.25);
  EXPECT_DOUBLE_EQ(report->theory_bubble_of_flush, 0.2);
  ASSERT_EQ(report->stages.size(), 2u);
  for (const StageBubble& st : report->stages) {
    EXPECT_NEAR(st.flush_ns, 15 * kMsNs, 1) << st.stage;
    EXPECT_NEAR(st.busy_ns, 12 * kMsNs, 1);
    EXPECT_NEAR(st.bubble_ns, 3 * kMsNs, 1);
    EXPECT_NEAR(st.bubble_of_flush, 0.2, 1e-9);
    EXPECT_NEAR(st.bubble_of_ideal, 0.25, 1e-9);
    EXPECT_NEAR(st.forward_ns, 1 * kMsNs, 1);
    EXPECT_NEAR(st.backward_ns, 2 * kMsNs, 1);
    EXPECT_NEAR(st.simulated_bubble_of_flush, 0.2, 1e-9);
  }
  EXPECT_NEAR(report->simulated_flush_ns, 15 * kMsNs, 1);

  auto findings = pipeline_bubble_findings(*report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "pipeline_bubble");
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_NEAR(findings[0].impact, 0.15, 1e-9);
  EXPECT_NE(findings[0].evidence.find("20.0% of the pipeline flush"), std::string::npos)
      << findings[0].evidence;
  EXPECT_NE(findings[0].advice.find("interleaved"), std::string::npos);
  EXPECT_NE(format_pipeline_bubble(*report).find("20.0%"), std::string::npos);
  EXPECT_DOUBLE_EQ(pipeline_bubble_json(*report)["stages"][1]["bubble_ms"].get<double>(), 3.0);
}

// The advice names only layouts launch would run: interleaving needs a layer per virtual stage
// and micro-batches a multiple of p (it offered --vpp 2 to a 2-layer, 1-micro-batch run).
TEST(PipelineBubbleAdvice, InterleavingOnlyWhereTheLayoutAllowsIt) {
  PipelineBubbleReport report;
  report.applicable = true;
  report.pp = 2;
  report.micro_batches = 1;
  report.layers = 2;
  StageBubble stage;
  stage.step_ns = 10;
  stage.bubble_ns = 5;
  stage.samples = 1;
  report.stages = {stage, stage};
  auto advice = [&] {
    auto findings = pipeline_bubble_findings(report);
    return findings.size() == 1 ? findings[0].advice : std::string("no finding");
  };
  EXPECT_EQ(advice().find("interleave"), std::string::npos) << advice();
  report.layers = 4;
  EXPECT_NE(advice().find("with micro-batches a multiple of 2, interleave (--pp-schedule "
                          "interleaved --vpp 2): (p-1)/(v m) = 50%"),
            std::string::npos)
      << advice();
  report.micro_batches = 4;
  EXPECT_NE(advice().find("; or interleave (--pp-schedule interleaved --vpp 2)"), std::string::npos)
      << advice();
  report.schedule = memory::PipelineSchedule::kInterleaved;
  report.vpp = 2;
  EXPECT_EQ(advice().find("--vpp 3"), std::string::npos) << advice();  // 6 chunks, 4 layers
  report.layers = 6;
  EXPECT_NE(advice().find("more virtual stages (--vpp 3): (p-1)/(v m) = 8%"), std::string::npos)
      << advice();
}

TEST_F(PipelineBubbleTest, NotApplicableWithoutPipeline) {
  auto trace = write_trace(gpt_config(2, 1, "1f1b", 2), 2, {step_event(0, 2, 0, 10)});
  auto report = analyze_pipeline_bubble(trace.db, window_of(2, 2, 2, 0, 10));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_FALSE(report->applicable);
  EXPECT_TRUE(pipeline_bubble_findings(*report).empty());
  EXPECT_NE(format_pipeline_bubble(*report).find("pp = 1"), std::string::npos);
}

TEST_F(PipelineBubbleTest, ForeignConfigIsNotApplicable) {
  auto trace = write_trace("{}", 1, {step_event(0, 2, 0, 10)});
  auto report = analyze_pipeline_bubble(trace.db, window_of(1, 2, 2, 0, 10));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_FALSE(report->applicable);
}

}  // namespace
}  // namespace partrain::analyzers
