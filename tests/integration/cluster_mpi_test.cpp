// partrain under a real Open MPI (Debian's openmpi-bin 4.1 with PMIx 4): mpirun on node1 starts
// one launcher per node on the sandbox's other nodes (tests/integration/cluster_sandbox.h; its
// remote-shell agent enters a node's namespaces where ssh would log in), with no --nnodes,
// --node-rank or --master-addr. Rank 0 runs on node2, not on mpirun's node1: the master comes
// from PMIx, not from the HNP URI in the environment, which names mpirun's host.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/integration/cluster_sandbox.h"
#include "tests/integration/command_runner.h"
#include "tests/integration/workload_equivalence.h"

namespace partrain::testing {
namespace {

const std::string kModel = small_gpt(4, 4, 3);
// One process per node on node2 and node3; two cores, so --oversubscribe.
const std::string kMpirun =
    "mpirun --oversubscribe -x " + kClusterToken + " --map-by ppr:1:node --host node2,node3";

TEST(ClusterMpi, MpirunPlacesEachNodeAndPmixNamesRankZerosHost) {
  PARTRAIN_START_CLUSTER(cluster, 3);
  CommandResult run = cluster.run(
      kMpirun +
      " partrain launch -n 2 --no-trace -- sh -c 'echo rank=$RANK node=$GROUP_RANK "
      "world=$WORLD_SIZE master=$MASTER_ADDR host=$(hostname)'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(unprefixed_lines(run.out),
            (std::set<std::string>{"rank=0 node=0 world=4 master=node2 host=node2",
                                   "rank=1 node=0 world=4 master=node2 host=node2",
                                   "rank=2 node=1 world=4 master=node2 host=node3",
                                   "rank=3 node=1 world=4 master=node2 host=node3"}))
      << run.out;
  EXPECT_NE(run.err.find("Open MPI: node 1 of 2, master node2 (rank 0's host, from PMIx)"),
            std::string::npos)
      << run.err;
}

TEST(ClusterMpi, BuiltInWorkloadsComputeWhatOneRankDoesAndTheirTracesMerge) {
  PARTRAIN_START_CLUSTER(cluster, 3);
  const nlohmann::json one_rank = one_rank_summary(cluster, kModel);
  const std::vector<std::pair<std::string, std::string>> layouts = {
      {"dp-pp", "--dp 2 --pp 2"}, {"zero2", "--dp 4 --zero 2"}};
  for (const auto& [name, layout] : layouts) {
    SCOPED_TRACE(layout);
    CommandResult run = cluster.run(kMpirun + " partrain launch -n 2 --json --trace " + name +
                                    ".db " + kModel + " " + layout);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    expect_equivalent(one_rank, parse_json_output(run.out), layout);
    // Node 1 (node3) wrote its own file beside node 0's; merged, they are one run of 4 ranks.
    CommandResult merged = cluster.run("partrain merge " + name + ".db " + name +
                                       ".node1.db -o " + name + "-all.db && partrain analyze "
                                       "--json " + name + "-all.db");
    ASSERT_EQ(merged.exit_code, 0) << merged.err;
    const nlohmann::json report = parse_json_output(merged.out);
    EXPECT_EQ(report["world_size"], 4);
    EXPECT_EQ(report["status"], "completed");
    EXPECT_GT(report["collective_matching"]["groups"].get<int>(), 0);
    EXPECT_EQ(report["collective_matching"]["missing_total"], 0);
  }
}

TEST(ClusterMpi, AFailingRankEndsTheJobWithItsCodeAsOnOneNode) {
  PARTRAIN_START_CLUSTER(cluster, 3);
  CommandResult run = cluster.run(kMpirun + " partrain launch -n 2 --no-trace " + kModel +
                                  " --dp 4 --inject crash:rank=3,step=1");
  EXPECT_EQ(run.exit_code, 134) << run.err;
  EXPECT_NE(run.err.find("partrain: error: rank 3 (node 1, host node3"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("exiting with 134 (128 + signal 6)"), std::string::npos) << run.err;
}

TEST(ClusterMpi, SeveralProcessesOnANodeAreRefusedWithTheFix) {
  PARTRAIN_START_CLUSTER(cluster, 3);
  // `mpirun -np 2 partrain launch` on one host: two launchers would share node 1.
  CommandResult run =
      cluster.run("mpirun --oversubscribe -np 2 partrain launch -n 2 --no-trace -- true");
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("Open MPI started 2 processes on this node "
                         "(OMPI_COMM_WORLD_LOCAL_SIZE=2)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("--map-by ppr:1:node"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace partrain::testing
