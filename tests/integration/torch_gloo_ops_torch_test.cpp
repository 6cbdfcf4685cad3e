// Correct gloo programs whose ops partrain followed badly (tests/integration/scripts/
// torch_gloo_ops.py under `partrain launch`): ops whose completion shows only in a wait() called
// from C++ or never called, receives from any source, a group made without a backend. Traced,
// they must run as they do untraced. Labelled `torch`; SKIPPED with one line without a torch
// interpreter (tests/support/torch_python.h).
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/command_runner.h"
#include "tests/integration/torch_scenarios.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/torch_python.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

CommandResult launch_case(const std::string& trace, int ranks, const std::string& options,
                          const std::string& scenario) {
  return launch_script_case(kScenarioScripts / "torch_gloo_ops.py", trace, ranks, options,
                            scenario);
}

// A functional reduce_scatter (waited in C++) and an isend rank 0 never waits on, then 4 s
// without collectives under --collective-timeout 2s: gloo's Work for either completes only in
// its wait(), so partrain never saw them end, and the watchdog ended the healthy job with 124
// ("the transport failed or stalled"). Now it leaves them alone while nothing waits on them.
TEST(TorchGlooOps, OpsNothingWaitsOnDoNotTripTheWatchdog) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "unwaited.db").string();
  const CommandResult run = launch_case(trace, 2, "--collective-timeout 2s", "unwaited_ops");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("collective watchdog"), std::string::npos) << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT rank, op, state FROM collectives WHERE op IN ('reduce_scatter', "
                       "'send') ORDER BY op, rank"),
            "0|reduce_scatter|started\n1|reduce_scatter|started\n0|send|started\n");
}

// Rank 0 receives 4 tensors from any source (dist.recv without src), 2 from each of ranks 1
// and 2. Each recv is numbered among its sender's, so it pairs with that send; numbered under
// peer -1 they never paired, and analyze called a healthy rank 0 "[critical]
// missing_collective": "rank 0 never recorded recv seqs 0-1 ... that rank 1 recorded".
TEST(TorchGlooOps, ARecvFromAnySourcePairsWithItsSend) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "any_source.db").string();
  const CommandResult run = launch_case(trace, 3, "", "recv_any_source");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  expect_collectives_matched(query);
  EXPECT_EQ(query.rows("SELECT peer, seq FROM collectives WHERE op = 'recv' AND rank = 0 "
                       "ORDER BY peer, seq"),
            "1|0\n1|1\n2|0\n2|1\n");
  const CommandResult analyze = run_partrain("analyze " + shell_quoted(trace));
  EXPECT_EQ(analyze.exit_code, 0) << analyze.err;
  EXPECT_EQ(analyze.out.find("missing"), std::string::npos) << analyze.out;
}

// init_process_group() without a backend: get_backend() says "undefined" (torch picks one per
// device, cpu:gloo here), and so did the stat torch_backend and export's distributedInfo.
TEST(TorchGlooOps, AGroupMadeWithoutABackendNamesTheOneTorchChose) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "no_backend.db").string();
  const CommandResult run = launch_case(trace, 2, "", "no_backend");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT rank, description FROM stats WHERE name = 'torch_backend' "
                       "ORDER BY rank"),
            "0|gloo\n1|gloo\n");
  EXPECT_EQ(query.number("SELECT count(*) FROM collectives WHERE op = 'all_reduce' AND "
                         "state = 'completed'"),
            2);
}

}  // namespace
}  // namespace partrain::testing
