// Unmodified PyTorch jobs under `partrain trace -- torchrun`: examples/pytorch's scripts (DDP,
// FSDP2, a 2-D DeviceMesh with tensor parallelism, a group made mid-run, torch.profiler with a
// schedule) on 4 gloo ranks of a real torch, recorded through partrain's Python module and
// checked against what the scripts' tensors imply (torch_scenarios.h). The scenarios share one
// set of processes (tests/integration/scripts/torch_scenarios.py): importing torch costs each
// rank seconds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/integration/command_runner.h"
#include "tests/integration/torch_scenarios.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

namespace fs = std::filesystem;

TEST(TorchTrace, TorchrunJobsAreRecordedWithoutTouchingTheScripts) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "torch.db";
  const std::string expect = (scratch.path() / "expected").string();

  const std::string plain = untraced_scenario_output();
  CommandResult traced = run_partrain("trace -o " + shell_quoted(trace) + " -- " +
                                      torchrun_scenarios("--expect " + expect));
  ASSERT_EQ(traced.exit_code, 0) << traced.err;
  EXPECT_EQ(traced.out, plain) << "the scripts' own output changed under partrain";
  EXPECT_NE(plain.find("profiler_schedule: parameters digest"), std::string::npos) << plain;

  TraceQuery query(trace);
  expect_collectives_matched(query);
  expect_scenarios_recorded(query, expect, kScenarioRanks);
  // PyTorch's own group names: the default group, the meshes' dimensions (HSDP's replicate and
  // shard, then dp and tp), the new groups.
  EXPECT_EQ(query.rows("SELECT DISTINCT substr(comm_id, 1, instr(comm_id, ':') - 1) AS name "
                       "FROM collectives ORDER BY name"),
            "default_pg\nmesh_dp\nmesh_replicate\nmesh_shard\nmesh_tp\nundefined\n");
  EXPECT_EQ(query.rows("SELECT comm_id, group_ranks FROM collectives WHERE comm_id LIKE 'mesh_%' "
                       "OR comm_id LIKE 'undefined:%' GROUP BY comm_id ORDER BY comm_id"),
            "mesh_dp:5|0,2\nmesh_dp:6|1,3\nmesh_replicate:1|0,2\nmesh_replicate:2|1,3\n"
            "mesh_shard:3|0,1\nmesh_shard:4|2,3\nmesh_tp:7|0,1\nmesh_tp:8|2,3\n"
            "undefined:10|2,3\nundefined:9|0,1\n");
  EXPECT_EQ(query.rows("SELECT status FROM runs"), "completed\n");
  expect_no_rows(query, "trace problems", "SELECT * FROM stats WHERE severity != 'info'");
}

TEST(TorchTrace, ARankThatRaisesIsNamedWithItsTracebackAndTheOthersStop) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "torch.db";
  CommandResult run = run_partrain(
      "trace -o " + shell_quoted(trace) + " -- " +
      torchrun_scenarios("--scenarios ddp_train --fail-at-step 2"));
  EXPECT_EQ(run.exit_code, 1) << run.err;  // torchrun's, as for a failed torchrun job
  EXPECT_NE(run.err.find("RuntimeError: ddp_train: rank 3 fails at step 2 as asked"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("rank      : 3 (local_rank: 3)"), std::string::npos)
      << "torchrun names the failing rank:\n"
      << run.err;

  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT status FROM runs"), "failed\n");
  const std::string failure = query.rows(
      "SELECT rank, severity, description FROM stats WHERE name = 'rank_uncaught_exception'");
  EXPECT_NE(failure.find("3|error|"), std::string::npos) << failure;
  EXPECT_NE(failure.find("in train | RuntimeError: ddp_train: rank 3 fails at step 2 as asked"),
            std::string::npos)
      << failure;
  EXPECT_EQ(query.rows("SELECT group_concat(step) FROM steps WHERE rank = 3"), "0,1\n");
}

// A worker torchrun restarted (TORCHELASTIC_RESTART_COUNT 1) names its groups apart from the
// first attempt's, so no collective is matched across attempts, and stores its steps under its
// attempt: attempt 0 ran steps 0-2, attempt 1 only 0-1, and analyze's figures are attempt 1's
// (job_restarted says so), not a mix of attempt 1's 0-1 and attempt 0's 2.
TEST(TorchTrace, ARestartedWorkersGroupsAndStepsAreToldApartFromTheFirstAttempts) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "restart.db";
  const fs::path script = scratch.path() / "attempt.py";
  std::ofstream(script) << "import os, sys, torch, torch.distributed as dist\n"
                           "attempt = int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                           "dist.init_process_group('gloo', init_method='file://' + sys.argv[1] +\n"
                           "                        str(attempt), rank=0, world_size=1)\n"
                           "p = torch.nn.Parameter(torch.ones(8))\n"
                           "opt = torch.optim.SGD([p], lr=0.1)\n"
                           "for _ in range(3 if attempt == 0 else 2):\n"
                           "    dist.all_reduce(torch.ones(8))\n"
                           "    p.grad = torch.ones(8)\n"
                           "    opt.step()\n"
                           "dist.destroy_process_group()\n";
  const fs::path launcher = scratch.path() / "restarting_launcher.sh";
  std::ofstream(launcher) << "py=$1; script=$2; dir=$3\n"
                             "for attempt in 0 1; do\n"
                             "  TORCHELASTIC_RESTART_COUNT=$attempt \"$py\" \"$script\" "
                             "\"$dir/rdzv\" || exit 1\n"
                             "done\n";
  CommandResult run = run_partrain("trace -o " + shell_quoted(trace) + " -- sh " +
                                   shell_quoted(launcher) + " " + shell_quoted(torch_python()) +
                                   " " + shell_quoted(script) + " " + shell_quoted(scratch.path()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT DISTINCT comm_id FROM collectives ORDER BY 1"),
            "default_pg:0\ndefault_pg:0@restart1\n");
  EXPECT_EQ(query.rows("SELECT attempt, group_concat(step) FROM (SELECT attempt, step FROM steps "
                       "ORDER BY attempt, step) GROUP BY attempt"),
            "0|0,1,2\n1|0,1\n");
  EXPECT_EQ(query.rows("SELECT count(*) FROM earlier_steps"), "0\n");
  CommandResult analyzed = run_partrain("analyze --skip-steps 0 " + shell_quoted(trace));
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  EXPECT_NE(analyzed.out.find("job_restarted: torchrun restarted the job's workers 1 time"),
            std::string::npos)
      << analyzed.out;
  EXPECT_NE(analyzed.out.find("(attempt 0 steps 0-2, attempt 1 steps 0-1); the step figures of "
                              "this analysis are attempt 1's (the last)"),
            std::string::npos)
      << analyzed.out;
  EXPECT_NE(analyzed.out.find("steps 0..1 (no warm-up skipped)"), std::string::npos)
      << analyzed.out;
}

// torchrun's restart made deterministic: a launcher that runs a 2-rank job twice as torchrun
// would (TORCHELASTIC_RESTART_COUNT 0, then 1), stopping the rank left when rank 0 exits. In
// attempt 0 rank 1 sleeps after 2 all-reduces and rank 0's watchdog fires in the third. In
// attempt 1 rank 1 sleeps after 1 and is stopped, dumping a second time, while rank 0 either
// ends after 1 (the job fails, without a hang) or hangs in its second (a second hang). Each
// hang is diagnosed from its own attempt's dumps (attempt 0's: rank 1's last was seq 1), never
// from rank 0's attempt-0 dump beside rank 1's attempt-1 one, and the exit is the last attempt's.
struct RestartedRun {
  CommandResult run;
  std::string diagnosis;  // the trace's collective_diagnosis rows: rank|description
};

RestartedRun run_restarted(const ScratchDir& scratch, const std::string& attempt1) {
  const fs::path trace = scratch.path() / (attempt1 + ".db");
  const fs::path script = scratch.path() / "attempt.py";
  std::ofstream(script)
      << "import os, sys, time, torch, torch.distributed as dist\n"
         "rank, attempt = int(os.environ['RANK']), int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
         "dist.init_process_group('gloo', init_method='file://' + sys.argv[1], rank=rank,\n"
         "                        world_size=2)\n"
         "ops, rank1_sleeps_at = (3, 2) if attempt == 0 else (2, 1)\n"
         "if attempt == 1 and rank == 0 and os.environ['ATTEMPT1'] == 'fails':\n"
         "    ops = 1\n"
         "for i in range(ops):\n"
         "    if rank == 1 and i == rank1_sleeps_at:\n"
         "        time.sleep(120)\n"
         "    dist.all_reduce(torch.ones(8))\n"
         "dist.destroy_process_group()\n";
  const fs::path launcher = scratch.path() / "restarting_launcher.sh";
  std::ofstream(launcher) << "py=$1; script=$2; dir=$3\n"
                             "for attempt in 0 1; do\n"
                             "  export TORCHELASTIC_RESTART_COUNT=$attempt WORLD_SIZE=2\n"
                             "  rm -f \"$dir/rdzv\"\n"
                             "  RANK=0 \"$py\" \"$script\" \"$dir/rdzv\" & zero=$!\n"
                             "  RANK=1 \"$py\" \"$script\" \"$dir/rdzv\" & one=$!\n"
                             "  wait $zero\n"
                             "  kill -TERM $one; wait $one\n"
                             "done\n"
                             "exit 1\n";
  RestartedRun out;
  out.run = run_partrain("trace --collective-timeout 3s -o " + shell_quoted(trace) + " -- sh " +
                             shell_quoted(launcher) + " " + shell_quoted(torch_python()) + " " +
                             shell_quoted(script) + " " + shell_quoted(scratch.path()),
                         "ATTEMPT1=" + attempt1);
  TraceQuery query(trace);
  out.diagnosis =
      query.rows("SELECT rank, description FROM stats WHERE name = 'collective_diagnosis'");
  return out;
}

TEST(TorchTrace, AHangInAnEarlierAttemptIsDiagnosedFromThatAttemptsDumps) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  constexpr const char* kAttempt0 =
      "partrain: flight recorder: attempt 0 (TORCHELASTIC_RESTART_COUNT=0):\n"
      "partrain: flight recorder: dumps of ranks 0,1; the collective watchdog fired on rank 0\n"
      "partrain: diagnosis: default_pg:0 seq 2: missing ranks: rank 1 never issued all_reduce";
  constexpr const char* kStat0 = "1|attempt 0: rank 1 (missing_ranks at default_pg:0 seq 2)";

  // Attempt 1 fails without a hang: only attempt 0 is diagnosed, and the exit is torchrun's 1.
  const RestartedRun fails = run_restarted(scratch, "fails");
  EXPECT_EQ(fails.run.exit_code, 1) << fails.run.err;
  EXPECT_NE(fails.run.err.find(kAttempt0), std::string::npos) << fails.run.err;
  EXPECT_EQ(fails.run.err.find("flight recorder: attempt 1"), std::string::npos) << fails.run.err;
  EXPECT_EQ(fails.run.err.find("never reached its first collective"), std::string::npos)
      << fails.run.err;
  EXPECT_EQ(fails.diagnosis.rfind(kStat0, 0), 0u) << fails.diagnosis;

  // Attempt 1 hangs too: both are diagnosed, each from its own dumps, both kept in the trace's
  // one row for rank 1; the last attempt's watchdog makes it a timeout (124).
  const RestartedRun hangs = run_restarted(scratch, "hangs");
  EXPECT_EQ(hangs.run.exit_code, 124) << hangs.run.err;
  EXPECT_NE(hangs.run.err.find(kAttempt0), std::string::npos) << hangs.run.err;
  EXPECT_NE(
      hangs.run.err.find("partrain: flight recorder: attempt 1 (TORCHELASTIC_RESTART_COUNT=1):\n"
                         "partrain: flight recorder: dumps of ranks 0,1; the collective "
                         "watchdog fired on rank 0\n"
                         "partrain: diagnosis: default_pg:0@restart1 seq 1: missing ranks: "
                         "rank 1 never issued all_reduce"),
      std::string::npos)
      << hangs.run.err;
  EXPECT_EQ(hangs.diagnosis.rfind(kStat0, 0), 0u) << hangs.diagnosis;
  EXPECT_NE(
      hangs.diagnosis.find("; attempt 1: rank 1 (missing_ranks at default_pg:0@restart1 seq 1)"),
      std::string::npos)
      << hangs.diagnosis;
}

// A program that marks steps with NVTX ranges (--step-marker, default ProfilerStep#N) keeps
// them: the module's optimizer steps give way instead of writing the same steps twice.
TEST(TorchTrace, NvtxStepMarkersWinOverTheOptimizersSteps) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "nvtx.db";
  CommandResult run = run_partrain("trace -o " + shell_quoted(trace) + " -- " +
                                   shell_quoted(torch_python()) + " " +
                                   shell_quoted(kScenarioScripts / "torch_nvtx_steps.py"),
                                   "RANK=0 WORLD_SIZE=1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT group_concat(step) FROM steps"), "10,11,12\n");
}

}  // namespace
}  // namespace partrain::testing
