// How a run ended, as analyze reads it from the run row and the stats: who failed first.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyzers/analysis_report.h"
#include "profiler/trace_open.h"
#include "profiler/trace_writer.h"
#include "tests/support/scratch_dir.h"

namespace partrain::analyzers {
namespace {

constexpr const char* kPeerGone =
    "File \"/job/train.py\", line 13, in <module> | File \"/venv/lib/python3.11/site-packages/"
    "torch/distributed/distributed_c10d.py\", line 6614, in barrier | RuntimeError: [gloo/"
    "transport/tcp/pair.cc:561] Connection closed by peer [127.0.0.1]:36070";
constexpr const char* kOwnError =
    "File \"/job/train.py\", line 10, in <module> | RuntimeError: boom on rank 1";

// A failed run traced under torchrun: no launcher said which rank failed, only the ranks'
// exceptions are in the trace.
RunOutcome outcome_of(const testing::ScratchDir& dir, std::vector<profiler::StatEvent> stats) {
  const auto path = dir.path() / "run.db";
  {
    auto writer = profiler::TraceWriter::create(path);
    EXPECT_TRUE(writer.is_ok()) << writer.status().message();
    (*writer)->append(profiler::RunInfo{"run-1", "torchrun train.py", "{}", 2, 1, 0});
    for (profiler::StatEvent& stat : stats) (*writer)->append(std::move(stat));
    EXPECT_TRUE((*writer)->set_run_status(profiler::RunStatus::kFailed).is_ok());
  }
  auto trace = profiler::open_trace(path);
  EXPECT_TRUE(trace.is_ok()) << trace.status().message();
  auto outcome = read_run_outcome(trace->db);
  EXPECT_TRUE(outcome.is_ok()) << outcome.status().message();
  return *outcome;
}

// Rank 0's exception rose out of a barrier its peer's exit broke; rank 1 raised in its own code:
// rank 1 failed first, though it is not the lowest rank.
TEST(RunOutcome, WithoutALauncherTheRankWhoseOwnCodeRaisedFailedFirst) {
  testing::ScratchDir dir;
  const RunOutcome outcome = outcome_of(
      dir, {{"rank_uncaught_exception", 0, 1, profiler::StatSeverity::kError, kPeerGone},
            {"rank_uncaught_exception", 1, 1, profiler::StatSeverity::kError, kOwnError}});
  ASSERT_TRUE(outcome.failing_rank);
  EXPECT_EQ(*outcome.failing_rank, 1);
  EXPECT_EQ(outcome.failing_exception, kOwnError);
  const std::vector<Finding> findings = run_outcome_findings(outcome);
  ASSERT_FALSE(findings.empty());
  const auto failed = std::find_if(findings.begin(), findings.end(),
                                   [](const Finding& f) { return f.kind == "rank_failed"; });
  ASSERT_NE(failed, findings.end());
  EXPECT_EQ(failed->rank, 1);
  EXPECT_NE(failed->evidence.find("rank 1 raised an uncaught exception (" + std::string(kOwnError)),
            std::string::npos)
      << failed->evidence;
  EXPECT_EQ(failed->evidence.find("launcher stopped the others"), std::string::npos);
}

// Every exception rose out of a collective (a real desync): the lowest rank.
TEST(RunOutcome, WhenEveryExceptionRoseInACollectiveTheLowestRank) {
  testing::ScratchDir dir;
  const RunOutcome outcome = outcome_of(
      dir, {{"rank_uncaught_exception", 3, 1, profiler::StatSeverity::kError, kPeerGone},
            {"rank_uncaught_exception", 2, 1, profiler::StatSeverity::kError, kPeerGone}});
  ASSERT_TRUE(outcome.failing_rank);
  EXPECT_EQ(*outcome.failing_rank, 2);
}

}  // namespace
}  // namespace partrain::analyzers
