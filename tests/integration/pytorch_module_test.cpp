// partrain's Python module (share/python) as the traced command's processes load it, on a
// stand-in torch (tests/integration/scripts/torch_stub: an older torch without ProcessGroup
// hooks), so these run without PyTorch: the notice an older torch gets, steps from the
// optimizer, a user's own sitecustomize still running, the module's own failure contained,
// nothing at all outside partrain, and (on stand-ins for a newer torch's group, Work and future)
// its threads done before the interpreter finalizes. The real torch's recording is
// trace_torchrun_torch_test.cpp's.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kScripts = fs::path(PARTRAIN_SOURCE_DIR) / "tests/integration/scripts";

// The stand-in torch, then a user's sitecustomize, on the program's PYTHONPATH (partrain puts
// its module in front).
std::string stub_environment() {
  return "RANK=0 WORLD_SIZE=1 PYTHONNOUSERSITE=1 PYTHONPATH='" +
         (kScripts / "torch_stub").string() + ":" + (kScripts / "torch_stub/user_site").string() +
         "'";
}

std::string program() { return "python3 '" + (kScripts / "torch_stub_program.py").string() + "'"; }

size_t occurrences(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST(PytorchModule, AnOlderTorchGetsOneNoticeAndItsStepsAndTheUsersSitecustomizeRuns) {
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "old.db";
  CommandResult run =
      run_partrain("trace -o '" + trace.string() + "' -- " + program(), stub_environment());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "user sitecustomize ran\nprogram done on torch 2.11.0\n");
  EXPECT_EQ(occurrences(run.err, "partrain: torch 2.11.0 has no ProcessGroup.register_pre_hook"),
            1u)
      << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT name, rank, severity FROM stats"),
            "torch_collectives_unrecorded|0|info\n");
  EXPECT_EQ(query.rows("SELECT group_concat(step) FROM steps WHERE rank = 0"), "0,1,2\n");
}

// An optimizer that steps another inside its step() (ZeroRedundancyOptimizer: the inner one
// updates the shard, then the wrapper broadcasts it) marks steps at its own end: the inner one's
// end had made step 0 the 0.1 s before it and put each broadcast in the next step.
TEST(PytorchModule, AWrappedOptimizersStepEndsWithTheWrapper) {
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "sharded.db";
  CommandResult run = run_partrain("trace -o '" + trace.string() + "' -- " + program(),
                                   stub_environment() + " TORCH_STUB_SHARDED=1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT group_concat(step) FROM steps WHERE rank = 0"), "0,1,2\n");
  // Each step: 0.1 s of "backward", 0.3 s of "broadcast".
  EXPECT_GE(query.number("SELECT min(dur_ns) FROM steps WHERE rank = 0"), 380'000'000)
      << query.rows("SELECT step, dur_ns FROM steps");

  // A wrapper's step() that raised (no post-hook ran) leaves nothing under way: the next ones
  // mark steps again.
  const fs::path raised = scratch.path() / "raised.db";
  CommandResult again = run_partrain("trace -o '" + raised.string() + "' -- " + program(),
                                     stub_environment() + " TORCH_STUB_SHARDED=raise-first");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(TraceQuery(raised).rows("SELECT group_concat(step) FROM steps WHERE rank = 0"),
            "0,1\n");
}

// A wrapper that never runs Optimizer.__init__ and steps its inner optimizer on every second
// call (accelerate's gradient accumulation): 4 calls are 2 steps, one per inner step. Each call
// had been a step (0,1,2,3).
TEST(PytorchModule, AWrappersStepThatStepsNoOptimizerIsNoStep) {
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "accumulating.db";
  CommandResult run = run_partrain("trace -o '" + trace.string() + "' -- " + program(),
                                   stub_environment() + " TORCH_STUB_ACCUMULATING=1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(TraceQuery(trace).rows("SELECT group_concat(step) FROM steps WHERE rank = 0"), "0,1\n");
}

TEST(PytorchModule, ItsOwnFailureIsSaidOnceAndTheProgramRunsOn) {
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "broken.db";
  CommandResult run = run_partrain("trace -o '" + trace.string() + "' -- " + program(),
                                   stub_environment() + " TORCH_STUB_BROKEN=1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("program done"), std::string::npos) << run.out;
  EXPECT_EQ(occurrences(run.err, "partrain's PyTorch recorder failed while attaching to a new "
                                 "process group (RuntimeError: get_rank is broken"),
            1u)
      << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT name, rank, severity FROM stats"),
            "torch_recorder_failed|0|error\n");
  EXPECT_EQ(query.number("SELECT count(*) FROM steps"), 0) << "recording stops at the failure";
}

// The module first on PYTHONPATH, as partrain puts it, but no collector: a process started
// outside partrain with a PYTHONPATH copied from a traced one.
TEST(PytorchModule, OutsidePartrainItDoesNothing) {
  CommandResult run = run_shell(
      "RANK=0 WORLD_SIZE=1 PYTHONNOUSERSITE=1 PYTHONPATH='" +
      (fs::path(PARTRAIN_SOURCE_DIR) / "share/python").string() + ":" +
      (kScripts / "torch_stub").string() + ":" + (kScripts / "torch_stub/user_site").string() +
      "' env -u PARTRAIN_COLLECTOR " + program());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "user sitecustomize ran\nprogram done on torch 2.11.0\n");
  EXPECT_EQ(run.err, "");
}

// The recorder's own threads (the one polling Work.is_completed, gloo's running and releasing the
// futures' callbacks) are done with Python when its exit handler returns: past that point the
// interpreter finalizes, and a thread that takes the GIL inside torch's C++ then aborts the
// process ("terminate called without an active exception", as a loaded `partrain trace --
// torchrun` run's rank did). The stand-ins hold both threads 0.3 s past the program's end.
TEST(PytorchModule, ItsThreadsAreDoneWithPythonBeforeTheInterpreterFinalizes) {
  CommandResult run =
      run_shell("PYTHONNOUSERSITE=1 PYTHONPATH='" +
                (fs::path(PARTRAIN_SOURCE_DIR) / "share/python").string() + "' python3 '" +
                (kScripts / "torch_module_exit.py").string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "program done\n"
            "after the recorder's exit: polling thread alive: False; callbacks held by gloo: 0\n");
  EXPECT_EQ(run.err, "");
}

// On a GPU host init_process_group() gives every group cpu:gloo and cuda:nccl, and
// get_backend() says "undefined": its NCCL ops were taken for gloo's (no NCCL window, so two rows
// per op; completion from the host future, which fires at enqueue), and the stat torch_backend
// said "undefined". With "cpu:gloo,cuda:nccl" said outright, its CPU ops were taken for NCCL's
// (a gloo reduce_scatter then never completed). The op's tensors now decide (stand-ins for a
// GPU host's torch; tests/integration/scripts/torch_backend_choice.py).
TEST(PytorchModule, AnOpRunsOnTheBackendOfItsTensorsDevice) {
  CommandResult run =
      run_shell("PYTHONNOUSERSITE=1 PYTHONPATH='" +
                (fs::path(PARTRAIN_SOURCE_DIR) / "share/python").string() + "' python3 '" +
                (kScripts / "torch_backend_choice.py").string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "init_process_group(): ALLREDUCE on cuda: NCCL window, polled\n"
            "init_process_group(): ALLREDUCE on cpu: no window, future\n"
            "init_process_group(): BARRIER on no tensor: NCCL window, polled\n"
            "\"cpu:gloo,cuda:nccl\": ALLREDUCE on cuda: NCCL window, polled\n"
            "\"cpu:gloo,cuda:nccl\": ALLREDUCE on cpu: no window, future\n"
            "\"cpu:gloo,cuda:nccl\": BARRIER on no tensor: NCCL window, polled\n"
            "torch_backend: cpu:gloo,cuda:nccl\n");
  EXPECT_EQ(run.err, "");
}

// What the recorder reports to the library of each op (stand-ins, as above): every op from its
// call (3), before the backend can abort the rank on it, then issued (2; 4 untimed for a gloo
// Work without a future, the send) and completed (0); a call that raised before its post hook
// (DETAIL's fingerprint check) failed (1) at exit. The op had reached the library only from its
// post hook, and the raising call never.
TEST(PytorchModule, OpsAreReportedFromTheirCallAndACallThatRaisedFailed) {
  CommandResult run =
      run_shell("PYTHONNOUSERSITE=1 PYTHONPATH='" +
                (fs::path(PARTRAIN_SOURCE_DIR) / "share/python").string() + "' python3 '" +
                (kScripts / "torch_module_exit.py").string() + "' --outcomes");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("\nSEND 3,4,0; ALLREDUCE 3,2,0; BROADCAST 3,1\n"), std::string::npos)
      << run.out;
}

}  // namespace
}  // namespace partrain::testing
