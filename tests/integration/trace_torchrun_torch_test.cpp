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
  // PyTorch's own group names: the default group, the mesh's dimensions, the new groups.
  EXPECT_EQ(query.rows("SELECT DISTINCT substr(comm_id, 1, instr(comm_id, ':') - 1) AS name "
                       "FROM collectives ORDER BY name"),
            "default_pg\nmesh_dp\nmesh_tp\nundefined\n");
  EXPECT_EQ(query.rows("SELECT comm_id, group_ranks FROM collectives WHERE comm_id LIKE 'mesh_%' "
                       "OR comm_id LIKE 'undefined:%' GROUP BY comm_id ORDER BY comm_id"),
            "mesh_dp:1|0,2\nmesh_dp:2|1,3\nmesh_tp:3|0,1\nmesh_tp:4|2,3\n"
            "undefined:5|0,1\nundefined:6|2,3\n");
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
// first attempt's, so no collective is matched across attempts, and analyze says the trace mixes
// attempts (their steps share numbers).
TEST(TorchTrace, ARestartedWorkersGroupsAreToldApartFromTheFirstAttempts) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "restart.db";
  const fs::path script = scratch.path() / "attempt.py";
  std::ofstream(script) << "import sys, torch, torch.distributed as dist\n"
                           "dist.init_process_group('gloo', init_method='file://' + sys.argv[1],\n"
                           "                        rank=0, world_size=1)\n"
                           "for _ in range(2):\n"
                           "    dist.all_reduce(torch.ones(8))\n"
                           "dist.destroy_process_group()\n";
  CommandResult run =
      run_partrain("trace -o " + shell_quoted(trace) + " -- " + shell_quoted(torch_python()) + " " +
                       shell_quoted(script) + " " + shell_quoted(scratch.path() / "rendezvous"),
                   "TORCHELASTIC_RESTART_COUNT=1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT DISTINCT comm_id FROM collectives"), "default_pg:0@restart1\n");
  CommandResult analyzed = run_partrain("analyze " + shell_quoted(trace));
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  EXPECT_NE(analyzed.out.find("job_restarted: torchrun restarted the job's workers 1 time"),
            std::string::npos)
      << analyzed.out;
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
