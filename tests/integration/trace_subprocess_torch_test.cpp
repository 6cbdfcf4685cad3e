// PyTorch jobs whose processes start processes of their own, under `partrain trace`: ranks that
// torch.multiprocessing.spawn started (under an sbatch script's inherited SLURM_PROCID too, and
// one of them raising), and a torchrun rank whose subprocess builds a private process group.
// Each is recorded as the ranks it has, never two processes as one rank.
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

// Three ranks torch.multiprocessing.spawn starts, each 3 all_reduces and a barrier on a gloo
// group made through a file; with a second argument rank 1 raises at its second all_reduce.
fs::path write_spawn_job(const ScratchDir& scratch) {
  const fs::path script = scratch.path() / "spawn_job.py";
  std::ofstream(script)
      << "import sys, torch, torch.distributed as dist, torch.multiprocessing as mp\n"
         "def worker(rank, world, rendezvous, fail):\n"
         "    dist.init_process_group('gloo', init_method='file://' + rendezvous, rank=rank,\n"
         "                            world_size=world)\n"
         "    for i in range(3):\n"
         "        dist.all_reduce(torch.ones(4))\n"
         "        if fail and rank == 1 and i == 1:\n"
         "            raise ValueError('rank 1 fails at its second all_reduce')\n"
         "    dist.barrier()\n"
         "    dist.destroy_process_group()\n"
         "if __name__ == '__main__':\n"
         "    mp.spawn(worker, args=(3, sys.argv[1], len(sys.argv) > 2), nprocs=3, join=True)\n";
  return script;
}

std::string spawn_command(const ScratchDir& scratch, const fs::path& trace, bool fail) {
  return "trace -o " + shell_quoted(trace) + " -- timeout -k 10 300 " +
         shell_quoted(torch_python()) + " " + shell_quoted(write_spawn_job(scratch)) + " " +
         shell_quoted(scratch.path() / "rendezvous") + (fail ? " fail" : "");
}

// An sbatch script's SLURM_PROCID=0 reaches every process mp.spawn starts: each is still the rank
// its process group says (all three were recorded as rank 0, with 3x its collectives).
TEST(TorchSubprocesses, SpawnedRanksUnderAnInheritedLauncherRankAreTheirGroupsRanks) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "spawn.db";
  CommandResult run = run_partrain(spawn_command(scratch, trace, false), "SLURM_PROCID=0");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT rank, count(DISTINCT pid) FROM ranks GROUP BY rank"),
            "0|1\n1|1\n2|1\n");
  EXPECT_EQ(query.rows("SELECT rank, count(*) FROM collectives GROUP BY rank"), "0|4\n1|4\n2|4\n");
  EXPECT_EQ(query.rows("SELECT rank FROM stats WHERE name = 'launcher_rank_inherited'"), "1\n2\n");
  expect_no_rows(query, "trace problems", "SELECT * FROM stats WHERE severity != 'info'");
}

// A spawned rank's exception never reaches sys.excepthook: spawn's _wrap catches it and exits 1.
// It is recorded as under torchrun, and analyze names the rank that failed.
TEST(TorchSubprocesses, ASpawnedRankThatRaisesIsNamedWithItsTraceback) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "spawn_fails.db";
  CommandResult run = run_partrain(spawn_command(scratch, trace, true));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("ValueError: rank 1 fails at its second all_reduce"), std::string::npos)
      << run.err;
  TraceQuery query(trace);
  const std::string failure = query.rows(
      "SELECT rank, severity, description FROM stats WHERE name = 'rank_uncaught_exception'");
  EXPECT_NE(failure.find("1|error|"), std::string::npos) << failure;
  EXPECT_NE(failure.find("in worker | ValueError: rank 1 fails at its second all_reduce"),
            std::string::npos)
      << failure;
  CommandResult analyzed = run_partrain("analyze " + shell_quoted(trace));
  EXPECT_NE(analyzed.out.find("rank_failed (rank 1): the run failed: rank 1 raised an uncaught "
                              "exception"),
            std::string::npos)
      << analyzed.out;
}

// A torchrun rank runs a tool that sets up a private single-process gloo group of its own (an
// evaluation step's): the tool is left untraced, said once per rank, and the rank keeps its pid
// and its groups (the tool took the rank over, its ops written as the rank's default_pg:0 seq
// 0 and 1 beside the rank's own, and analyze found the group's members differing).
TEST(TorchSubprocesses, ARanksSubprocessWithAGroupOfItsOwnLeavesTheRankAlone) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const fs::path trace = scratch.path() / "sub.db";
  const fs::path tool = scratch.path() / "tool.py";
  std::ofstream(tool) << "import sys, torch, torch.distributed as dist\n"
                         "dist.init_process_group('gloo', init_method='file://' + sys.argv[1],\n"
                         "                        rank=0, world_size=1)\n"
                         "dist.all_reduce(torch.ones(3))\n"
                         "dist.barrier()\n"
                         "dist.destroy_process_group()\n";
  const fs::path job = scratch.path() / "job.py";
  std::ofstream(job)
      << "import os, subprocess, sys, torch, torch.distributed as dist\n"
         "dist.init_process_group('gloo')\n"
         "rank = dist.get_rank()\n"
         "with open(os.path.join(sys.argv[1], f'pid{rank}'), 'w') as out:\n"
         "    out.write(f'{rank}|{os.getpid()}')\n"
         "for i in range(4):\n"
         "    dist.all_reduce(torch.ones(8))\n"
         "    if i == 1:\n"
         "        subprocess.run([sys.executable, sys.argv[2],\n"
         "                        os.path.join(sys.argv[1], f'tool{rank}')], check=True)\n"
         "dist.barrier()\n"
         "dist.destroy_process_group()\n";
  CommandResult run =
      run_partrain("trace -o " + shell_quoted(trace) + " -- timeout -k 10 300 " + torchrun() +
                   " --standalone --nproc-per-node 2 " + shell_quoted(job) + " " +
                   shell_quoted(scratch.path()) + " " + shell_quoted(tool));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT rank || '|' || pid FROM ranks ORDER BY rank"),
            read_file((scratch.path() / "pid0").string()) + "\n" +
                read_file((scratch.path() / "pid1").string()) + "\n");
  EXPECT_EQ(query.rows("SELECT rank, comm_id, count(*), max(seq) FROM collectives "
                       "GROUP BY rank, comm_id ORDER BY rank"),
            "0|default_pg:0|5|4\n1|default_pg:0|5|4\n");
  EXPECT_EQ(query.rows("SELECT rank, value FROM stats WHERE name = 'rank_subprocess_untraced' "
                       "ORDER BY rank"),
            "0|1\n1|1\n");
  expect_no_rows(query, "takeovers", "SELECT * FROM stats WHERE name = 'rank_process_taken_over'");
  CommandResult analyzed = run_partrain("analyze " + shell_quoted(trace));
  ASSERT_EQ(analyzed.exit_code, 0) << analyzed.err;
  EXPECT_EQ(analyzed.out.find("group_members_differ"), std::string::npos) << analyzed.out;
}

}  // namespace
}  // namespace partrain::testing
