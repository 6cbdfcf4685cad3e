// Unmodified PyTorch jobs under `partrain launch -- python` (partrain, not
// torchrun, starts the ranks and serves their TCPStore): examples/pytorch's
// scripts (DDP, FSDP2, a 2-D DeviceMesh with tensor parallelism, a group made
// mid-run, torch.profiler with a schedule) on 4 gloo ranks of a real torch,
// recorded through partrain's Python module and checked against what the
// scripts' tensors imply, as trace_torchrun_torch_test.cpp checks them under
// `partrain trace -- torchrun`.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/integration/command_runner.h"
#include "tests/integration/torch_scenarios.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

// The scenarios under `partrain launch` (a stuck job ends at CTest's timeout).
std::string launched_scenarios(const fs::path &trace,
                               const std::string &arguments,
                               const std::string &launch_flags = "") {
  return "launch -n " + std::to_string(kScenarioRanks) + " --no-prefix " +
         launch_flags + " --trace " + shell_quoted(trace) + " -- " +
         shell_quoted(torch_python()) + " " + shell_quoted(kScenarios) + " " +
         arguments;
}

TEST(TorchLaunch, ScriptsLaunchedByPartrainAreRecordedWithoutTouchingThem) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "torch.db";
  const std::string expect = (scratch.path() / "expected").string();

  const std::string plain = untraced_scenario_output();
  CommandResult traced =
      run_partrain(launched_scenarios(trace, "--expect " + expect));
  ASSERT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(traced.out, plain)
      << "the scripts' own output changed under partrain launch";

  TraceQuery query(trace);
  expect_collectives_matched(query);
  expect_scenarios_recorded(query, expect, kScenarioRanks);
  EXPECT_EQ(query.rows("SELECT DISTINCT substr(comm_id, 1, instr(comm_id, ':') - 1) AS name "
                       "FROM collectives ORDER BY name"),
            "default_pg\nmesh_dp\nmesh_replicate\nmesh_shard\nmesh_tp\nundefined\n");
  EXPECT_EQ(query.rows("SELECT status FROM runs"), "completed\n");
  expect_no_rows(query, "trace problems", "SELECT * FROM stats WHERE severity != 'info'");

  // analyze tells the truth about a CPU job whose compute partrain does not record: it says so,
  // and weighs nothing against that compute (no idle, exposed-communication or imbalance).
  CommandResult analyzed = run_partrain("analyze --json " + shell_quoted(trace));
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  const nlohmann::json report = nlohmann::json::parse(analyzed.out);
  std::set<std::string> kinds;
  for (const auto& finding : report.at("findings")) {
    kinds.insert(finding.at("kind").get<std::string>());
  }
  EXPECT_TRUE(kinds.count("compute_unrecorded")) << analyzed.out;
  for (const char* made_up : {"idle", "exposed_communication", "compute_imbalance"}) {
    EXPECT_FALSE(kinds.count(made_up)) << made_up << " judged against unrecorded compute";
  }
}

// A rank that raises (no @record: the exception reaches the interpreter) is
// named first with its traceback's last lines from its stderr, the others are
// stopped, and the launcher exits with the rank's code, as for built-in
// workloads.
TEST(TorchLaunch, ARankThatRaisesIsNamedWithItsTracebackAndTheOthersStop) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "torch.db";
  CommandResult run = run_partrain(launched_scenarios(
      trace, "--scenarios ddp_train --fail-at-step 2", "--grace 5s"));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("rank 3 (node 0, host "), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("failed first with exit code 1"), std::string::npos)
      << run.err;
  EXPECT_NE(
      run.err.find("RuntimeError: ddp_train: rank 3 fails at step 2 as asked"),
      std::string::npos)
      << run.err;
  EXPECT_NE(
      run.err.find(
          "the other ranks were stopped; exiting with 1 (rank 3's exit code)"),
      std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("has not stopped: sending SIGKILL"), std::string::npos)
      << run.err;

  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT status FROM runs"), "failed\n");
  EXPECT_EQ(query.rows("SELECT group_concat(step) FROM steps WHERE rank = 3"),
            "0,1\n");
  // analyze names the exception with the failure, from the program's own line.
  CommandResult analyzed = run_partrain("analyze " + shell_quoted(trace));
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  EXPECT_NE(analyzed.out.find("rank 3 exited with code 1 first on an uncaught exception (File "),
            std::string::npos)
      << analyzed.out;
  EXPECT_NE(analyzed.out.find("| RuntimeError: ddp_train: rank 3 fails at step 2 as asked), and "
                              "the launcher stopped the others"),
            std::string::npos)
      << analyzed.out;
}

// Most programs end without destroy_process_group(): sys.exit(3), or a normal end. Their exit
// statuses are theirs: the hooks partrain put on the groups leave them before the interpreter
// ends (c10d's registry, destroyed after it, took a finalized interpreter's GIL with them:
// SIGSEGV, exit 139, on every traced run). The program's tensor lives to its end: gloo's worker
// thread, even on one rank, aborts a program at exit without partrain too when it frees the last
// reference to a tensor the program dropped (PyTorch's race, docs/pytorch.md; 1 run in 160 of
// `all_reduce(torch.ones(64))` on a loaded host), which would blur the status.
TEST(TorchLaunch, ARankEndingWithoutDestroyingItsGroupsKeepsItsExitStatus) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path script = scratch.path() / "no_destroy.py";
  std::ofstream(script) << R"(import sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
GRADIENT = torch.ones(64)
for step in range(3):
    dist.all_reduce(GRADIENT)
sys.exit(int(sys.argv[1]))
)";
  for (int status : {3, 0}) {
    SCOPED_TRACE(status);
    const fs::path trace = scratch.path() / fmt::format("t{}.db", status);
    CommandResult run = run_partrain("launch -n 1 --trace " + shell_quoted(trace) + " -- " +
                                     shell_quoted(torch_python()) + " " + shell_quoted(script) +
                                     " " + std::to_string(status));
    EXPECT_EQ(run.exit_code, status) << run.err;
    EXPECT_EQ(run.err.find("SIGSEGV"), std::string::npos) << run.err;
  }
  // The export names the job's backend as torch said it (it said nccl for every traced job
  // with collectives).
  CommandResult exported = run_partrain("export -o - " + shell_quoted(scratch.path() / "t0.db"));
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(nlohmann::json::parse(exported.out).at("distributedInfo").at("backend"), "gloo");
}

// A rank told to stop as it execs: partrain's SIGTERM handler gives the signal to its relay
// thread, which dumps the flight recorder and flushes the trace before sending it on. An exec
// that came before the relay's thread ran took it, and the signal with it: the new image
// (`sleep 30`) ran on as if never stopped. The exec now waits for the relay, and a signal sent
// again stays pending across an exec, so the rank ends by it. End to end the race is rare here
// (17 of 17 runs passed without the wait, 12 of them beside two busy loops);
// RankFlightTest.AnExecWaitsForTheStopSignalItsRelayHolds pins the wait itself.
TEST(TorchLaunch, ARankStoppedAsItExecsStaysStopped) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path script = scratch.path() / "stop_then_exec.py";
  std::ofstream(script) << R"(import os, signal, torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.all_reduce(torch.ones(4))
os.kill(os.getpid(), signal.SIGTERM)
os.execv("/bin/sleep", ["sleep", "30"])
)";
  const fs::path trace = scratch.path() / "stopped.db";
  CommandResult run = run_shell(fmt::format(
      "timeout -k 5 60 {} launch -n 1 --trace {} -- {} {}", partrain_binary(), shell_quoted(trace),
      shell_quoted(torch_python()), shell_quoted(script)));
  EXPECT_EQ(run.exit_code, 128 + 15) << run.err;
  EXPECT_NE(run.err.find("signal 15 (SIGTERM)"), std::string::npos) << run.err;
  EXPECT_EQ(TraceQuery(trace).rows("SELECT rank, exit_signal FROM ranks"), "0|15\n");
}

// The tensors of a gloo op the recorder followed to its completion are freed by the program, not
// by gloo's worker thread: the recorder holds the op's Work from the done-callback the worker runs
// until the program's next collective, and from its exit on for good. Without that the worker,
// delayed by the callback, was often the last holder and took the GIL to free the tensor, in the
// interpreter's finalization at exit: SIGABRT (9 runs in 160 of a 1-rank sys.exit(3) on a loaded
// host, 2 with the hold, 1 without partrain; docs/pytorch.md). Untraced, all three are "freed".
TEST(TorchLaunch, AGlooOpsTensorIsFreedByTheProgramNotByGloosWorkerThread) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path script = scratch.path() / "held.py";
  std::ofstream(script) << R"(import atexit, sys, time, weakref
LAST = []
def after_partrain():  # registered before torch's import: runs after partrain's atexit handler
    print("at the end:", "alive" if LAST[0]() is not None else "freed", flush=True)
atexit.register(after_partrain)
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(64)
first = weakref.ref(t)
dist.all_reduce(t)
del t
time.sleep(0.3)  # gloo's worker thread is long done with the op
print("after its wait:", "alive" if first() is not None else "freed")
dist.all_reduce(torch.ones(2))
print("after the next op:", "alive" if first() is not None else "freed")
t = torch.ones(64)
LAST.append(weakref.ref(t))
dist.all_reduce(t)
del t
time.sleep(0.3)
dist.destroy_process_group()
)";
  CommandResult run =
      run_partrain("launch -n 1 --no-prefix --trace " + shell_quoted(scratch.path() / "held.db") +
                   " -- " + shell_quoted(torch_python()) + " " + shell_quoted(script));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "after its wait: alive\nafter the next op: freed\nat the end: alive\n");
}

// A rank aborted by a gloo thread in the interpreter's shutdown (PyTorch's race, docs/pytorch.md)
// had finished its work: the launcher's summary says the signal came after its program ended,
// from the flight dump the abort made, not that an assertion or a C++ exception may have failed.
// The abort here is the program's own atexit handler, registered before torch's import, so it
// runs after partrain's, where the race's abort lands. The same abort mid-program is said as any
// abort.
TEST(TorchLaunch, ARankThatAbortsAfterItsProgramEndedIsSaidToHaveEnded) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path script = scratch.path() / "ends_then_aborts.py";
  std::ofstream(script) << R"(import atexit, os, sys
if sys.argv[1] in ("after", "kept"):
    atexit.register(os.abort)
import torch, torch.distributed as dist
dist.init_process_group("gloo")
KEPT = dist.group.WORLD if sys.argv[1] == "kept" else None
dist.all_reduce(torch.ones(2))
if sys.argv[1] == "during":
    os.abort()
dist.destroy_process_group()
)";
  const std::string ended =
      "hint: rank 0's program had ended (its Python atexit handlers had "
      "run): the signal came in the interpreter's shutdown, after its work";
  const std::string aborted = "hint: the worker aborted (a failed assertion";
  for (const char* when : {"after", "during"}) {
    SCOPED_TRACE(when);
    const fs::path trace = scratch.path() / fmt::format("{}.db", when);
    CommandResult run =
        run_partrain("launch -n 1 --trace " + shell_quoted(trace) + " -- " +
                     shell_quoted(torch_python()) + " " + shell_quoted(script) + " " + when);
    EXPECT_EQ(run.exit_code, 134) << run.err;
    const bool after = std::string(when) == "after";
    EXPECT_EQ(run.err.find(ended) != std::string::npos, after) << run.err;
    EXPECT_EQ(run.err.find(aborted) != std::string::npos, !after) << run.err;
  }

  // Under torchrun, with the group kept past its destroy (the stat says so at exit): analyze
  // names the rank that vanished after its program ended, though no exit is in the trace.
  const fs::path trace = scratch.path() / "torchrun.db";
  CommandResult run =
      run_partrain("trace --trace " + shell_quoted(trace) + " -- " + torchrun() +
                   " --standalone --nproc-per-node 1 " + shell_quoted(script) + " kept");
  EXPECT_NE(run.exit_code, 0) << run.err;
  CommandResult analyzed = run_partrain("analyze " + shell_quoted(trace));
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  EXPECT_NE(analyzed.out.find("rank_failed (rank 0): the run failed: no rank raised an uncaught "
                              "exception, and rank 0 ended without closing its connection to the "
                              "collector (killed or aborted) after its program had ended (its "
                              "atexit handlers had run): gloo group default_pg:0 outlived "
                              "destroy_process_group()"),
            std::string::npos)
      << analyzed.out;
}

} // namespace
} // namespace partrain::testing
