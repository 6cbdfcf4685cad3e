// analyze_temporal_breakdown on hand-made traces with hand-computed answers: interval unions of
// nested and overlapping slices, overlap of communication with compute (fully inside: 100%,
// half inside: 50%), memcpy, idle, windows clipping slices, step statistics, findings, text and
// JSON.
#include "analyzers/temporal_breakdown.h"

#include <gtest/gtest.h>

#include "analyzers/analysis_report.h"
#include "analyzers/gpu_timeline.h"
#include "tests/unit/analyzers/analysis_trace_fixture.h"

namespace partrain::analyzers {
namespace {

using namespace testing;  // NOLINT: the fixture's helpers
using SC = SliceCategory;

class TemporalBreakdownTest : public AnalysisTraceTest {
 protected:
  // Analyses `events` over choose_window(options); one rank's row unless asked.
  TemporalBreakdown analyze(std::vector<TraceEvent> events, const WindowOptions& options = {},
                            int world_size = 1) {
    auto trace = write_trace(std::move(events), world_size);
    auto window = choose_window(trace.db, options);
    EXPECT_TRUE(window.is_ok()) << window.status().message();
    if (!window.is_ok()) return {};
    auto report = analyze_temporal_breakdown(trace.db, *window);
    EXPECT_TRUE(report.is_ok()) << report.status().message();
    return report.is_ok() ? *report : TemporalBreakdown{};
  }
};

// Rank 0, steps 0..2 of 10 ms; step 0 is warm-up.
std::vector<TraceEvent> three_steps(int rank = 0) {
  std::vector<TraceEvent> events = {rank_info(rank)};
  for (int64_t step = 0; step < 3; ++step) {
    const double start = 10.0 * static_cast<double>(step);
    add_step(events, rank, step, start, start + 10);
  }
  return events;
}

TEST(IntervalUnionTest, NestedOverlappingAndAdjacentIntervalsCountOnce) {
  IntervalUnion u;
  u.add(0, 10);
  u.add(2, 5);    // nested
  u.add(8, 14);   // overlapping
  u.add(14, 15);  // adjacent
  u.add(20, 21);  // apart
  EXPECT_EQ(u.total_ns(), 16);
  EXPECT_EQ(IntervalUnion().total_ns(), 0);
}

TEST_F(TemporalBreakdownTest, CollectiveFullyInsideComputeIsFullyOverlapped) {
  auto events = three_steps();
  events.push_back(slice(0, SC::kCompute, 12, 18, 1));
  events.push_back(slice(0, SC::kCollective, 13, 15, 1, "tp0"));
  const RankBreakdown row = analyze(events).ranks.at(0);
  EXPECT_EQ(row.comm_ns, 2 * kMs);
  EXPECT_EQ(row.overlap_ns, 2 * kMs);
  EXPECT_DOUBLE_EQ(*row.overlap_pct(), 100.0);
  EXPECT_EQ(row.exposed_comm_ns(), 0);
}

TEST_F(TemporalBreakdownTest, CollectiveHalfInsideComputeIsHalfOverlapped) {
  auto events = three_steps();
  events.push_back(slice(0, SC::kCompute, 12, 16, 1));
  events.push_back(slice(0, SC::kCollective, 15, 17, 1, "dp0"));
  const RankBreakdown row = analyze(events).ranks.at(0);
  EXPECT_DOUBLE_EQ(*row.overlap_pct(), 50.0);
  EXPECT_EQ(row.exposed_comm_ns(), 1 * kMs);
  EXPECT_EQ(row.busy_ns, 5 * kMs);
  EXPECT_EQ(row.idle_ns(), 20 * kMs - 5 * kMs);
}

// Window [10, 30) ms, 2 steps. compute [10,14) ∪ [11,12) ∪ [13,16) ∪ [20,24) = 10 ms; comm
// [9,10.5) clipped to [10,10.5), [15,17), [21,23) = 4.5 ms, of which [10,10.5) + [15,16) +
// [21,23) = 3.5 ms under compute; memcpy [25,26) ∪ memset [25.5,27) = 2 ms; busy [10,17) ∪
// [20,24) ∪ [25,27) = 13 ms; idle 7 ms, 3 of them inside the phase [10,20). Warm-up compute
// [0,10) and phase/step slices are not compute.
TEST_F(TemporalBreakdownTest, HandComputedBreakdown) {
  auto events = three_steps();
  events.push_back(slice(0, SC::kCompute, 0, 10, 0));
  events.push_back(slice(0, SC::kPhase, 10, 20, 1));
  events.push_back(slice(0, SC::kCompute, 10, 14, 1));
  events.push_back(slice(0, SC::kCompute, 11, 12, 1));
  events.push_back(slice(0, SC::kCompute, 13, 16, 1));
  events.push_back(slice(0, SC::kCollective, 9, 10.5, 1, "dp0"));
  events.push_back(slice(0, SC::kCollective, 15, 17, 1, "dp0"));
  events.push_back(slice(0, SC::kKernel, 20, 24, 2));
  events.push_back(slice(0, SC::kP2p, 21, 23, 2, "pp0-1"));
  events.push_back(slice(0, SC::kMemcpy, 25, 26, 2));
  events.push_back(slice(0, SC::kMemset, 25.5, 27, 2, "stream 2"));
  events.push_back(slice(0, SC::kSync, 27, 29, 2));  // sync is none of the kinds: idle
  const TemporalBreakdown report = analyze(events);
  ASSERT_EQ(report.ranks.size(), 1u);
  const RankBreakdown& row = report.ranks[0];
  EXPECT_EQ(row.window_ns, 20 * kMs);
  EXPECT_EQ(row.steps, 2);
  EXPECT_EQ(row.compute_ns, 10 * kMs);
  EXPECT_EQ(row.comm_ns, 4'500'000);
  EXPECT_EQ(row.overlap_ns, 3'500'000);
  EXPECT_NEAR(*row.overlap_pct(), 77.7778, 1e-3);
  EXPECT_EQ(row.memcpy_ns, 2 * kMs);
  EXPECT_EQ(row.busy_ns, 13 * kMs);
  EXPECT_EQ(row.idle_ns(), 7 * kMs);
  EXPECT_EQ(row.exposed_comm_ns(), 1 * kMs);
  EXPECT_EQ(row.exposed_memcpy_ns(), 2 * kMs);
  EXPECT_EQ(row.idle_in_phases_ns, 3 * kMs);  // phase [10,20) minus busy [10,17)
  EXPECT_DOUBLE_EQ(*row.ms_per_step(row.compute_ns), 5.0);
  EXPECT_DOUBLE_EQ(row.pct_of_window(row.idle_ns()), 35.0);
}

TEST_F(TemporalBreakdownTest, PhasesAndStepsAloneAreIdle) {
  auto events = three_steps();
  events.push_back(slice(0, SC::kPhase, 10, 20, 1));
  events.push_back(slice(0, SC::kPhase, 20, 30, 2));
  const RankBreakdown row = analyze(events).ranks.at(0);
  EXPECT_EQ(row.compute_ns, 0);
  EXPECT_EQ(row.idle_ns(), 20 * kMs);
  EXPECT_FALSE(row.overlap_pct().has_value());
  EXPECT_EQ(row.idle_in_phases_ns, 20 * kMs);
}

TEST_F(TemporalBreakdownTest, StepTimesOverTheWindowsSteps) {
  std::vector<TraceEvent> events = {rank_info(0)};
  // Warm-up step 0 of 50 ms, then steps of 10, 40, 20, 30 ms.
  double t = 0;
  int64_t step = 0;
  for (double length : {50.0, 10.0, 40.0, 20.0, 30.0}) {
    add_step(events, 0, step++, t, t + length);
    t += length;
  }
  const RankBreakdown row = analyze(events).ranks.at(0);
  EXPECT_EQ(row.step_times.count, 4);
  EXPECT_DOUBLE_EQ(row.step_times.median_ns, 25.0 * kMs);
  EXPECT_DOUBLE_EQ(row.step_times.p90_ns, 40.0 * kMs);  // nearest rank: ceil(0.9 * 4) = 4th
  EXPECT_DOUBLE_EQ(row.step_times.mean_ns, 25.0 * kMs);
  EXPECT_EQ(row.window_ns, 100 * kMs);
}

TEST_F(TemporalBreakdownTest, WithoutStepsTheWholeRunIsTheWindow) {
  std::vector<TraceEvent> events = {rank_info(0)};
  events.push_back(slice(0, SC::kCompute, 100, 200));
  events.push_back(slice(0, SC::kCollective, 300, 400, -1, "nccl 1"));
  const TemporalBreakdown report = analyze(events);
  EXPECT_FALSE(report.has_steps);
  const RankBreakdown& row = report.ranks.at(0);
  EXPECT_EQ(row.window_ns, 300 * kMs);
  EXPECT_EQ(row.compute_ns, 100 * kMs);
  EXPECT_EQ(row.comm_ns, 100 * kMs);
  EXPECT_EQ(row.idle_ns(), 100 * kMs);
  EXPECT_DOUBLE_EQ(*row.overlap_pct(), 0.0);
  EXPECT_FALSE(row.ms_per_step(row.compute_ns).has_value());
  EXPECT_EQ(row.step_times.count, 0);
}

TEST_F(TemporalBreakdownTest, RankFilterAnalysesOnlyThoseRanks) {
  auto events = three_steps(0);
  for (auto& event : three_steps(1)) events.push_back(event);
  events.push_back(slice(1, SC::kCompute, 10, 15, 1));
  const TemporalBreakdown report = analyze(events, select_ranks({1}), 2);
  ASSERT_EQ(report.ranks.size(), 1u);
  EXPECT_EQ(report.ranks[0].rank, 1);
  EXPECT_EQ(report.ranks[0].compute_ns, 5 * kMs);
}

bool has_kind(const std::vector<Finding>& findings, const std::string& kind) {
  for (const Finding& f : findings) {
    if (f.kind == kind) return true;
  }
  return false;
}

TEST_F(TemporalBreakdownTest, ExposedCommunicationAndIdleFindings) {
  auto events = three_steps();
  events.push_back(slice(0, SC::kCompute, 10, 13, 1));
  events.push_back(slice(0, SC::kCollective, 13, 19, 1, "dp0"));  // 6 ms, none under compute
  events.push_back(slice(0, SC::kCompute, 20, 26, 2));
  // Busy [10,19) and [20,26): idle 5 of 20 ms (25%, a warning).
  const std::vector<Finding> findings = temporal_findings(analyze(events));
  ASSERT_TRUE(has_kind(findings, "exposed_communication"));
  ASSERT_TRUE(has_kind(findings, "idle"));
  for (const Finding& f : findings) {
    EXPECT_FALSE(f.evidence.empty());
    EXPECT_FALSE(f.advice.empty());
    if (f.kind == "exposed_communication") {
      EXPECT_DOUBLE_EQ(f.impact, 0.3);  // 6 of 20 ms exposed
      EXPECT_EQ(f.severity, Severity::kCritical);
      EXPECT_NE(f.evidence.find("30.0%"), std::string::npos) << f.evidence;
      // None of it overlaps: an exact 0%, not "0.0%" (a zero that may not be one).
      EXPECT_NE(f.evidence.find("and 0% of it overlaps compute"), std::string::npos) << f.evidence;
    }
    if (f.kind == "idle") {
      EXPECT_DOUBLE_EQ(f.impact, 0.25);
      EXPECT_EQ(f.severity, Severity::kWarning);
    }
  }
}

// A traced process's lifetime slice (the phase named "process" its injection library writes)
// is not a phase of its work: idle time under it is idle, not "inside phases".
TEST_F(TemporalBreakdownTest, AProcessLifetimeIsNoPhase) {
  auto events = three_steps();
  profiler::SliceEvent lifetime = slice(0, SC::kPhase, 0, 30);
  lifetime.name = "process";
  events.push_back(lifetime);
  events.push_back(slice(0, SC::kPhase, 20, 30, 2));  // a real phase
  events.push_back(slice(0, SC::kCompute, 10, 12, 1));
  const RankBreakdown row = analyze(events).ranks.at(0);
  EXPECT_EQ(row.idle_ns(), 18 * kMs);
  EXPECT_EQ(row.idle_in_phases_ns, 10 * kMs);  // the real phase's, not the lifetime's 18
}

// A foreign program on the CPU: its collectives and steps recorded, its compute not. No finding
// judges time against compute then (all of it would be "idle", all communication "exposed");
// one says why instead.
TEST_F(TemporalBreakdownTest, WithoutAnyComputeRecordedOnlyThatIsSaid) {
  std::vector<TraceEvent> events;
  for (int rank = 0; rank < 2; ++rank) {
    for (auto& event : three_steps(rank)) events.push_back(event);
    events.push_back(slice(rank, SC::kCollective, 12, 14 + 3 * rank, 1, "default_pg:0"));
    events.push_back(slice(rank, SC::kCollective, 22, 24, 2, "default_pg:0"));
  }
  const TemporalBreakdown report = analyze(events, {}, 2);
  const std::vector<Finding> findings = temporal_findings(report);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].kind, "compute_unrecorded");
  // Nor does the table or --json make it up: compute, overlap, exposed comm and idle are unknown
  // ('-', null), not "0 ms" beside "75% idle"; communication stands as measured.
  EXPECT_FALSE(compute_recorded(report));
  const std::string text = format_temporal_breakdown(report);
  EXPECT_NE(text.find("compute: none recorded"), std::string::npos) << text;
  // The overlap column is a share of the communication (overlap_pct), not of the window the
  // other columns' shares are of: the header says so.
  EXPECT_NE(text.find("overlap: % of comm under compute"), std::string::npos) << text;
  // Per rank one " 0 ms", memcpy's (none was made: that is measured); compute's was another.
  size_t zeros = 0;
  for (size_t at = text.find(" 0 ms"); at != std::string::npos; at = text.find(" 0 ms", at + 1)) {
    ++zeros;
  }
  EXPECT_EQ(zeros, 2u) << text;
  const nlohmann::json ranks = temporal_breakdown_json(report);
  for (const char* key : {"compute_ms", "compute_pct", "idle_pct", "idle_ms_per_step",
                          "exposed_comm_pct", "overlap_pct"}) {
    EXPECT_TRUE(ranks[0][key].is_null()) << key << ": " << ranks[0];
  }
  EXPECT_GT(ranks[0]["comm_ms"].get<double>(), 0);
  EXPECT_EQ(ranks[0]["compute_recorded"], false);
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
  EXPECT_NE(findings[0].evidence.find("of the 2 ranks"), std::string::npos) << findings[0].evidence;
  EXPECT_NE(findings[0].advice.find("partrain import"), std::string::npos) << findings[0].advice;

  // With compute on one rank, the usual findings are made again.
  events.push_back(slice(0, SC::kCompute, 10, 11, 1));
  EXPECT_FALSE(has_kind(temporal_findings(analyze(events, {}, 2)), "compute_unrecorded"));
}

TEST_F(TemporalBreakdownTest, BusyOverlappedBalancedRanksHaveNoFindings) {
  std::vector<TraceEvent> events;
  for (int rank = 0; rank < 2; ++rank) {
    for (auto& event : three_steps(rank)) events.push_back(event);
    events.push_back(slice(rank, SC::kCompute, 10, 30, -1));
    events.push_back(slice(rank, SC::kCollective, 12, 16, -1, "dp0"));
  }
  EXPECT_TRUE(temporal_findings(analyze(events, {}, 2)).empty());
}

TEST_F(TemporalBreakdownTest, ComputeImbalanceNamesTheSlowRank) {
  std::vector<TraceEvent> events;
  for (int rank = 0; rank < 3; ++rank) {
    for (auto& event : three_steps(rank)) events.push_back(event);
    const double compute_ms = rank == 2 ? 9.5 : 6;
    events.push_back(slice(rank, SC::kCompute, 10, 10 + compute_ms, 1));
    events.push_back(slice(rank, SC::kCompute, 20, 20 + compute_ms, 2));
  }
  const std::vector<Finding> findings = temporal_findings(analyze(events, {}, 3));
  ASSERT_TRUE(has_kind(findings, "compute_imbalance"));
  for (const Finding& f : findings) {
    if (f.kind != "compute_imbalance") continue;
    EXPECT_EQ(f.rank, 2);
    EXPECT_EQ(f.severity, Severity::kCritical);  // (9.5 - 6) / 9.5 = 36.8% spread
    EXPECT_NE(f.evidence.find("rank 2 computes 9.50 ms per step, the median rank 6.00 ms"),
              std::string::npos)
        << f.evidence;
    EXPECT_NEAR(f.impact, 3.5 / 10, 1e-9);  // what the median rank waits, per 10 ms step
  }
}

// Four ranks computing 4, 6, 7 and 9.5 ms: the median is the mean of the middle two, 6.5 ms,
// not the upper one (7 ms), so the impact is (9.5 - 6.5) / 10.
TEST_F(TemporalBreakdownTest, ComputeImbalanceMedianOfAnEvenCountIsTheMiddleTwosMean) {
  std::vector<TraceEvent> events;
  const double compute_ms[] = {4, 6, 7, 9.5};
  for (int rank = 0; rank < 4; ++rank) {
    for (auto& event : three_steps(rank)) events.push_back(event);
    events.push_back(slice(rank, SC::kCompute, 10, 10 + compute_ms[rank], 1));
    events.push_back(slice(rank, SC::kCompute, 20, 20 + compute_ms[rank], 2));
  }
  const std::vector<Finding> findings = temporal_findings(analyze(events, {}, 4));
  ASSERT_TRUE(has_kind(findings, "compute_imbalance"));
  for (const Finding& f : findings) {
    if (f.kind != "compute_imbalance") continue;
    EXPECT_EQ(f.rank, 3);
    EXPECT_NE(f.evidence.find("the median rank 6.50 ms"), std::string::npos) << f.evidence;
    EXPECT_NEAR(f.impact, 3.0 / 10, 1e-9);
  }
}

TEST_F(TemporalBreakdownTest, WaitingInACollectiveInsideComputeIsNotImbalance) {
  std::vector<TraceEvent> events;
  for (int rank = 0; rank < 2; ++rank) {
    for (auto& event : three_steps(rank)) events.push_back(event);
    // Both compute 6 ms per step; rank 1 waits 3 ms longer in an all-reduce inside its compute.
    const double wait = rank == 1 ? 4 : 1;
    events.push_back(slice(rank, SC::kCompute, 10, 16 + wait, 1));
    events.push_back(slice(rank, SC::kCollective, 13, 13 + wait, 1, "tp0"));
    events.push_back(slice(rank, SC::kCompute, 20, 26 + wait, 2));
    events.push_back(slice(rank, SC::kCollective, 23, 23 + wait, 2, "tp0"));
  }
  const TemporalBreakdown report = analyze(events, {}, 2);
  EXPECT_EQ(report.ranks.at(1).compute_only_ns(), 12 * kMs);
  EXPECT_FALSE(has_kind(temporal_findings(report), "compute_imbalance"));
}

// A kernel of `rank` named `name` on a CUDA stream, as a traced rank records it.
profiler::KernelRecord kernel(int rank, const char* name, double start_ms, double end_ms,
                              int64_t step, const char* stream = "gpu0 stream 7") {
  profiler::KernelRecord k;
  k.slice = slice(rank, SC::kKernel, start_ms, end_ms, step, stream);
  k.slice.name = name;
  return k;
}
constexpr const char* kNcclKernel = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

// A GPU rank, window [10, 30). The host's NCCL call [10, 10.5) (its enqueue) and NCCL's kernels
// [14, 19) and [26, 28) communicate: 7.5 ms. gemm [10.5, 16), softmax [17, 18) on another stream
// and gemm [20, 26) compute: 12.5 ms. Under compute: [14, 16) and [17, 18) of the first NCCL
// kernel, 3 ms (40%); exposed 4.5 ms. Busy [10, 19) and [20, 28): idle 3 ms. The GPU table counts
// the same kernels: comm 7 ms (the host's call aside), the same 3 ms under compute.
TEST_F(TemporalBreakdownTest, NcclKernelsAreCommunicationNotCompute) {
  auto events = three_steps();
  events.push_back(slice(0, SC::kCollective, 10, 10.5, 1, "nccl:aa"));
  events.push_back(kernel(0, "gemm", 10.5, 16, 1));
  events.push_back(kernel(0, kNcclKernel, 14, 19, 1, "gpu0 stream 13"));
  events.push_back(kernel(0, "softmax", 17, 18, 1, "gpu0 stream 21"));
  events.push_back(kernel(0, "gemm", 20, 26, 2));
  events.push_back(kernel(0, kNcclKernel, 26, 28, 2, "gpu0 stream 13"));
  auto trace = write_trace(events, 1);
  auto window = choose_window(trace.db, {});
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  auto report = analyze_temporal_breakdown(trace.db, *window);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  const RankBreakdown& row = report->ranks.at(0);
  EXPECT_EQ(row.compute_ns, 12'500'000);
  EXPECT_EQ(row.comm_ns, 7'500'000);
  EXPECT_EQ(row.overlap_ns, 3 * kMs);
  EXPECT_DOUBLE_EQ(*row.overlap_pct(), 40.0);
  EXPECT_EQ(row.exposed_comm_ns(), 4'500'000);
  EXPECT_EQ(row.idle_ns(), 3 * kMs);
  EXPECT_EQ(row.compute_only_ns(), 12'500'000);  // compute under NCCL's kernels is work

  auto gpu = analyze_gpu_timeline(trace.db, *window);
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  ASSERT_EQ(gpu->ranks.size(), 1u);
  EXPECT_EQ(gpu->ranks[0].comm_ns, row.comm_ns - 500'000);  // all but the host's call
  EXPECT_EQ(gpu->ranks[0].overlap_ns, row.overlap_ns);
  EXPECT_EQ(gpu->ranks[0].compute_ns, row.compute_ns);
}

// Two GPU ranks computing 6 ms per step alike; rank 1's NCCL kernel runs under 4 ms of its
// compute, rank 0's after it. The exposed communication is found; no imbalance is: compute under
// a kernel of NCCL's is work, not a wait in a collective call.
TEST_F(TemporalBreakdownTest, NcclKernelsExposedAndComputeUnderThemIsWork) {
  std::vector<TraceEvent> events;
  for (int rank = 0; rank < 2; ++rank) {
    for (auto& event : three_steps(rank)) events.push_back(event);
    for (int64_t step = 1; step <= 2; ++step) {
      const double t = 10.0 * static_cast<double>(step);
      events.push_back(kernel(rank, "gemm", t, t + 6, step));
      const double nccl = rank == 0 ? t + 6 : t + 2;
      events.push_back(kernel(rank, kNcclKernel, nccl, nccl + 4, step, "gpu0 stream 13"));
    }
  }
  const TemporalBreakdown report = analyze(events, {}, 2);
  EXPECT_EQ(report.ranks.at(0).exposed_comm_ns(), 8 * kMs);
  EXPECT_EQ(report.ranks.at(1).exposed_comm_ns(), 0);
  EXPECT_EQ(report.ranks.at(0).compute_only_ns(), 12 * kMs);
  EXPECT_EQ(report.ranks.at(1).compute_only_ns(), 12 * kMs);
  const std::vector<Finding> findings = temporal_findings(report);
  ASSERT_TRUE(has_kind(findings, "exposed_communication"));
  EXPECT_FALSE(has_kind(findings, "compute_imbalance"));
  for (const Finding& f : findings) {
    if (f.kind != "exposed_communication") continue;
    EXPECT_EQ(f.rank, 0);
    EXPECT_DOUBLE_EQ(f.impact, 0.2);  // 8 of 20 ms on rank 0, none on rank 1
  }
}

TEST_F(TemporalBreakdownTest, TextAndJsonCarryTheSameNumbers) {
  auto events = three_steps();
  events.push_back(slice(0, SC::kCompute, 10, 16, 1));
  events.push_back(slice(0, SC::kCollective, 15, 17, 1, "dp0"));
  const TemporalBreakdown report = analyze(events);
  const std::string text = format_temporal_breakdown(report);
  EXPECT_NE(text.find("3.00 ms  30.0%"), std::string::npos) << text;  // compute per step
  EXPECT_NE(text.find("50.0%"), std::string::npos) << text;           // overlap
  const nlohmann::json json = temporal_breakdown_json(report);
  ASSERT_EQ(json.size(), 1u);
  const nlohmann::json& rank = json[0];
  EXPECT_EQ(rank["rank"], 0);
  EXPECT_DOUBLE_EQ(rank["compute_ms"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(rank["comm_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(rank["memcpy_ms"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(rank["idle_ms"].get<double>(), 13.0);
  EXPECT_DOUBLE_EQ(rank["overlap_pct"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(rank["step_ms_median"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(rank["compute_ms_per_step"].get<double>(), 3.0);
  const double sum = rank["compute_pct"].get<double>() + rank["exposed_comm_pct"].get<double>() +
                     rank["exposed_memcpy_pct"].get<double>() + rank["idle_pct"].get<double>();
  EXPECT_DOUBLE_EQ(sum, 100.0);
}

// 40 ranks, rank 17 computing 9 of each 10 ms step where the others compute 5: the report's text
// prints rank 17 and the rank nearest the median, not the other 38, and says so; with --rank
// choosing all 40 it prints each.
TEST_F(TemporalBreakdownTest, ManyRanksPrintTheOnesThatStandOut) {
  constexpr int kRanks = 40;
  std::vector<TraceEvent> events;
  for (int rank = 0; rank < kRanks; ++rank) {
    for (TraceEvent& e : three_steps(rank)) events.push_back(std::move(e));
    for (int64_t step = 1; step < 3; ++step) {
      const double start = 10.0 * static_cast<double>(step);
      events.push_back(slice(rank, SC::kCompute, start, start + (rank == 17 ? 9 : 5), step));
    }
  }
  auto trace = write_trace(std::move(events), kRanks);
  auto window = choose_window(trace.db, {});
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  auto report = analyze_run(trace.db, *window);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  std::string text = format_report(*report);
  const std::string table = text.substr(text.find("Time per rank"));
  EXPECT_NE(table.find("\n  17 "), std::string::npos) << table;
  EXPECT_NE(table.find("\n   0 "), std::string::npos) << table;  // nearest the median
  EXPECT_EQ(table.find("\n   5 "), std::string::npos) << table;
  EXPECT_NE(table.find("... 38 of 40 ranks not printed: each within 5% of the median"),
            std::string::npos)
      << table;

  std::vector<int> all(kRanks);
  for (int rank = 0; rank < kRanks; ++rank) all[rank] = rank;
  window = choose_window(trace.db, select_ranks(all));
  ASSERT_TRUE(window.is_ok()) << window.status().message();
  report = analyze_run(trace.db, *window);
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  text = format_report(*report);
  EXPECT_NE(text.find("\n   5 "), std::string::npos) << text;
  EXPECT_EQ(text.find("ranks not printed"), std::string::npos) << text;
}

}  // namespace
}  // namespace partrain::analyzers
