// The heavier cluster variants (`ctest -L long`): three nodes of two ranks under srun and mpirun,
// layouts whose groups span the nodes in every direction, and a job cancelled by Slurm.
#include <gtest/gtest.h>

#include <string>

#include "tests/integration/cluster_sandbox.h"
#include "tests/integration/command_runner.h"
#include "tests/integration/workload_equivalence.h"

namespace partrain::testing {
namespace {

const std::string kModel = small_gpt(6, 6, 4);

int count_occurrences(const std::string& text, const std::string& what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST(ClusterLong, ThreeNodesOfEveryLayoutComputeWhatOneRankDoes) {
  PARTRAIN_START_CLUSTER(cluster, 3);
  const nlohmann::json one_rank = one_rank_summary(cluster, kModel);
  for (const std::string layout :
       {"--dp 6", "--dp 3 --tp 2 --sp", "--dp 2 --pp 3", "--tp 2 --pp 3",
        "--dp 2 --pp 3 --pp-schedule interleaved --vpp 2", "--dp 2 --pp 3 --pp-schedule gpipe",
        "--dp 6 --zero 3", "--dp 3 --tp 2 --zero 1"}) {
    SCOPED_TRACE(layout);
    for (const std::string& engine :
         {kClusterToken + " srun -N3 --ntasks-per-node=1 --overcommit",
          "mpirun --oversubscribe -x " + kClusterToken +
              " --map-by ppr:1:node --host node1,node2,node3"}) {
      CommandResult run = cluster.run(engine + " partrain launch -n 2 --no-trace --json " +
                                          kModel + " " + layout,
                                      300);
      ASSERT_EQ(run.exit_code, 0) << engine << "\n" << run.err;
      expect_equivalent(one_rank, parse_json_output(run.out), engine + " " + layout);
    }
  }
}

TEST(ClusterLong, ACancelledJobStopsEveryNodeWithSigterm) {
  PARTRAIN_START_CLUSTER(cluster, 3);
  // scancel sends the step's tasks SIGTERM: each launcher stops its workers and exits 143, as
  // one launcher does on SIGTERM.
  CommandResult run = cluster.run(
      kClusterToken + " srun -N3 --ntasks-per-node=1 partrain launch -n 2 --no-trace " + kModel +
      " --dp 6 --steps 100000 & sleep 8; scancel --signal=TERM $(squeue -h -o %i); wait $!");
  EXPECT_EQ(run.exit_code, 143) << run.err;
  EXPECT_EQ(count_occurrences(run.err, "partrain: error: stopped by SIGTERM; every worker has "
                                       "exited"),
            3)
      << run.err;
}

}  // namespace
}  // namespace partrain::testing
