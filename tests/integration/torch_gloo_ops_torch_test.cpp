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

}  // namespace
}  // namespace partrain::testing
