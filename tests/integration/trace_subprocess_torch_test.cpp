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

}  // namespace
}  // namespace partrain::testing
