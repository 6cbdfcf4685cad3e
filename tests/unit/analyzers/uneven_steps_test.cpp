// uneven_steps on hand-made traces: a DDP job under torch's Join with 2, 5 and 8 batches on
// ranks 0-2 (the explorer's p_join.py), and an even job for contrast.
#include "analyzers/uneven_steps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "analyzers/analysis_report.h"
#include "tests/unit/analyzers/collective_fixture.h"

namespace partrain::analyzers {
namespace {

using fixture::CollectiveTrace;
using fixture::window;

constexpr int64_t kStepNs = 10'000'000;

// Rank r steps `steps[r]` times, one all_reduce per step of the longest rank: a rank out of
// batches keeps joining them (Join shadows the others' all_reduces) in the step it never ends.
// Rank 2 comes 2 ms late to each all_reduce (it steps longest: what had read as a straggler).
void add_uneven_run(CollectiveTrace& trace, const std::vector<int64_t>& steps) {
  const int64_t longest = *std::max_element(steps.begin(), steps.end());
  for (int64_t seq = 0; seq < longest; ++seq) {
    for (int rank = 0; rank < 3; ++rank) {
      const int64_t last = steps[static_cast<size_t>(rank)] - 1;
      const int64_t start = seq * kStepNs + (rank == 2 ? 2'000'000 : 0);
      trace.add({.rank = rank,
                 .seq = static_cast<uint64_t>(seq),
                 .start_ns = start,
                 .group = {0, 1, 2},
                 .step = std::min(seq, last + 1)});
      if (seq <= last) trace.step(rank, seq, seq * kStepNs, kStepNs - 1);
    }
  }
}

TEST(UnevenStepsTest, RanksThatStopSteppingButKeepCommunicatingAreSaid) {
  CollectiveTrace trace("join");
  add_uneven_run(trace, {2, 5, 8});
  auto report = analyze_run(trace.finish(), window({0, 1, 2}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  const Finding* uneven = nullptr;
  for (const Finding& f : report->findings) {
    if (f.kind == "uneven_steps") uneven = &f;
    // Its lateness is weighed against ranks doing other work: no warning blames it.
    if (f.kind == "straggler") EXPECT_EQ(f.severity, Severity::kInfo) << f.evidence;
  }
  ASSERT_NE(uneven, nullptr);
  EXPECT_EQ(uneven->severity, Severity::kWarning);
  // Rank 0 stepped 0-1 then joined 6 more all_reduces (seqs 2-7), rank 1 steps 0-4 then 3.
  EXPECT_NE(uneven->evidence.find("rank 0 stopped after step 1, then issued 6 collectives; "
                                  "rank 1 stopped after step 4, then issued 3 collectives; "
                                  "rank 2 stopped after step 7, then issued 0 collectives"),
            std::string::npos)
      << uneven->evidence;
}

TEST(UnevenStepsTest, EvenRanksAreNotUneven) {
  CollectiveTrace trace("even");
  add_uneven_run(trace, {8, 8, 8});
  auto report = analyze_run(trace.finish(), window({0, 1, 2}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  for (const Finding& f : report->findings) EXPECT_NE(f.kind, "uneven_steps") << f.evidence;
}

const Finding* find_uneven(const AnalysisReport& report) {
  for (const Finding& f : report.findings) {
    if (f.kind == "uneven_steps") return &f;
  }
  return nullptr;
}

profiler::StatEvent stat(std::string name, int32_t rank, profiler::StatSeverity severity) {
  return profiler::StatEvent{std::move(name), rank, 1, severity, ""};
}

// A live trace (partrain analyze while the job runs) catches rank 0 inside step 7, whose
// all_reduce it issued, and ranks 1 and 2 past it: one step apart, as any running job's ranks
// are. It read "rank 0 stopped after step 6, then issued 1 collective ... (uneven inputs ...)".
TEST(UnevenStepsTest, ARunningJobsRanksOneStepApartAreNotUneven) {
  CollectiveTrace trace("live");
  add_uneven_run(trace, {7, 8, 8});
  auto report = analyze_run(trace.finish(profiler::RunStatus::kRunning), window({0, 1, 2}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  const Finding* uneven = find_uneven(*report);
  EXPECT_EQ(uneven, nullptr) << uneven->evidence;
}

// Rank 0 stopped stepping after step 1 because it died there (killed, crashed, or its last
// records were lost), not because its inputs ran out: no uneven inputs are said, and the
// straggler stays a warning. Each trace had read "uneven inputs: torch's Join context ...".
TEST(UnevenStepsTest, ARankThatStoppedByItsDeathIsNotUneven) {
  using profiler::RunStatus;
  using profiler::StatSeverity;
  struct Case {
    const char* what;
    RunStatus status;
    std::vector<profiler::StatEvent> stats;
  };
  const std::vector<Case> cases = {
      {"killed",
       RunStatus::kFailed,
       {stat("collector_unclean_disconnects", 0, StatSeverity::kInfo)}},
      {"raised", RunStatus::kFailed, {stat("rank_uncaught_exception", 0, StatSeverity::kError)}},
      {"records_lost",
       RunStatus::kFailed,
       {stat("rank_dropped_records", 0, StatSeverity::kDataLoss)}},
      {"drain_timeout",
       RunStatus::kFailed,
       {stat("collector_drain_timeouts", -1, StatSeverity::kDataLoss)}},
      {"job_killed", RunStatus::kKilled, {}},
  };
  for (const Case& c : cases) {
    CollectiveTrace trace(c.what);
    add_uneven_run(trace, {2, 8, 8});
    for (const profiler::StatEvent& event : c.stats) trace.add(event);
    auto report = analyze_run(trace.finish(c.status), window({0, 1, 2}));
    ASSERT_TRUE(report.is_ok()) << report.status().message();
    const Finding* uneven = find_uneven(*report);
    EXPECT_EQ(uneven, nullptr) << c.what << ": " << uneven->evidence;
  }
}

// In a failed run, ranks that ran out of inputs and ended by themselves are still uneven: only
// rank 2, which failed, is no evidence.
TEST(UnevenStepsTest, RanksThatEndedByThemselvesInAFailedRunAreUneven) {
  CollectiveTrace trace("failed_join");
  add_uneven_run(trace, {2, 5, 8});
  trace.add(stat("collector_unclean_disconnects", 2, profiler::StatSeverity::kInfo));
  auto report = analyze_run(trace.finish(profiler::RunStatus::kFailed), window({0, 1, 2}));
  ASSERT_TRUE(report.is_ok()) << report.status().message();
  EXPECT_NE(find_uneven(*report), nullptr);
}

}  // namespace
}  // namespace partrain::analyzers
