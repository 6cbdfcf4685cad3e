// partrain under a real Slurm (Debian's slurm-wlm 22.05: munged, slurmctld and a slurmd per node,
// started by the test in namespaces, tests/integration/cluster_sandbox.h): two nodes, each its
// own network namespace and host name, one launcher per node started by srun and sbatch, with no
// --nnodes, --node-rank or --master-addr.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/integration/cluster_sandbox.h"
#include "tests/integration/command_runner.h"
#include "tests/integration/workload_equivalence.h"

namespace partrain::testing {
namespace {

const std::string kModel = small_gpt(4, 4, 3);
const std::string kTwoNodes = kClusterToken + " srun -N2 --ntasks-per-node=1 --overcommit";

TEST(ClusterSlurm, SrunPlacesEachNodeWithoutFlags) {
  PARTRAIN_START_CLUSTER(cluster, 2);
  CommandResult run = cluster.run(
      kTwoNodes +
      " partrain launch -n 2 --no-trace -- sh -c 'echo rank=$RANK local=$LOCAL_RANK "
      "node=$GROUP_RANK world=$WORLD_SIZE master=$MASTER_ADDR host=$(hostname)'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(unprefixed_lines(run.out), (std::set<std::string>{
                       "rank=0 local=0 node=0 world=4 master=node1 host=node1",
                       "rank=1 local=1 node=0 world=4 master=node1 host=node1",
                       "rank=2 local=0 node=1 world=4 master=node1 host=node2",
                       "rank=3 local=1 node=1 world=4 master=node1 host=node2"}))
      << run.out;
  EXPECT_NE(run.err.find("Slurm: node 1 of 2, master node1 (the first host of "
                         "SLURM_STEP_NODELIST=node[1-2])"),
            std::string::npos)
      << run.err;
}

TEST(ClusterSlurm, BuiltInWorkloadsOfEveryLayoutFamilyComputeWhatOneRankDoes) {
  PARTRAIN_START_CLUSTER(cluster, 2);
  const nlohmann::json one_rank = one_rank_summary(cluster, kModel);
  // 2 nodes x 2 ranks; a tensor- or pipeline-parallel group spanning the nodes is slow on a real
  // cluster, but computes the same.
  for (const std::string layout : {"--dp 4", "--tp 4", "--pp 4", "--dp 4 --zero 1",
                                   "--dp 4 --zero 3", "--dp 2 --tp 2 --sp", "--tp 2 --pp 2"}) {
    SCOPED_TRACE(layout);
    CommandResult run = cluster.run(kTwoNodes +
                                    " partrain launch -n 2 --no-trace --json " + kModel + " " +
                                    layout);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    // Node 0's launcher prints the summary of the whole world; node 1 prints none.
    const nlohmann::json summary = parse_json_output(run.out);
    EXPECT_EQ(summary["world"], 4);
    expect_equivalent(one_rank, summary, layout);
    EXPECT_NE(run.err.find("Slurm: node 0 of 2"), std::string::npos) << run.err;
  }
}

TEST(ClusterSlurm, FailuresExitAndAreSummarisedAsOnOneNode) {
  PARTRAIN_START_CLUSTER(cluster, 2);
  // Rank 3 (node 2) crashes: on one node the launcher exits 134 naming it; so do both here.
  const std::string crash = " --no-trace --inject crash:rank=3,step=1 " + kModel + " --dp 4";
  CommandResult one_node = cluster.run("partrain launch -n 4" + crash);
  EXPECT_EQ(one_node.exit_code, 134) << one_node.err;
  EXPECT_NE(one_node.err.find("partrain: error: rank 3 (node 0, host node1"), std::string::npos)
      << one_node.err;
  CommandResult two_nodes = cluster.run(kTwoNodes + " partrain launch -n 2" + crash);
  EXPECT_EQ(two_nodes.exit_code, 134) << two_nodes.err;
  // Node 2's launcher names its own rank; node 1's the same rank, on another node.
  EXPECT_NE(two_nodes.err.find("partrain: error: rank 3 (node 1, host node2"), std::string::npos)
      << two_nodes.err;
  EXPECT_NE(two_nodes.err.find("on another node"), std::string::npos) << two_nodes.err;
  EXPECT_NE(two_nodes.err.find("exiting with 134 (128 + signal 6)"), std::string::npos)
      << two_nodes.err;

  // A command's exit code is passed on, as on one node.
  CommandResult command = cluster.run(
      kTwoNodes +
      " partrain launch -n 2 --no-trace -- sh -c '[ $RANK = 2 ] && exit 7; sleep 30'");
  EXPECT_EQ(command.exit_code, 7) << command.err;
  EXPECT_NE(command.err.find("rank 2 (node 1, host node2"), std::string::npos) << command.err;
}

TEST(ClusterSlurm, TheExampleJobScriptTrainsMergesAndAnalyses) {
  PARTRAIN_START_CLUSTER(cluster, 2);
  const std::string script = std::string(PARTRAIN_SOURCE_DIR) + "/examples/slurm/train.sbatch";
  // As a user submits it, with a layout of their own; --wait returns the job's exit code.
  CommandResult job = cluster.run("sbatch --wait --parsable --output=job.out " + script +
                                  " -n 2 " + kModel + " --dp 2 --tp 2");
  const std::string output = read_file(cluster.dir() + "/job.out");
  ASSERT_EQ(job.exit_code, 0) << job.err << output;
  const std::string job_id = job.out.substr(0, job.out.find_first_of(";\n"));
  EXPECT_NE(output.find("Slurm: node 1 of 2"), std::string::npos) << output;
  const std::string runs = cluster.dir() + "/partrain-runs/job-" + job_id;
  EXPECT_TRUE(std::filesystem::exists(runs + ".db")) << output;
  EXPECT_TRUE(std::filesystem::exists(runs + ".node1.db")) << output;
  // The script merged the nodes' files and analysed the whole run.
  CommandResult analysis = cluster.run("partrain analyze --json " + runs + ".all.db");
  ASSERT_EQ(analysis.exit_code, 0) << analysis.err;
  const nlohmann::json report = parse_json_output(analysis.out);
  EXPECT_EQ(report["world_size"], 4);
  EXPECT_EQ(report["status"], "completed");
  std::set<int> ranks;
  for (const auto& rank : report["ranks"]) ranks.insert(rank["rank"].get<int>());
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3})) << analysis.out;
  // Collectives of ranks on different nodes, recorded in different files, matched by (comm, seq).
  EXPECT_GT(report["collective_matching"]["groups"].get<int>(), 0) << analysis.out;
  EXPECT_EQ(report["collective_matching"]["missing_total"], 0) << analysis.out;

  // A layout the launcher refuses (exit 2) writes no trace: the job ends with srun's code (the
  // refusing launcher's 2, or 143 when --kill-on-bad-exit stopped the other node's first), not
  // merge's complaint about a missing file (exit 3).
  CommandResult refused = cluster.run("sbatch --wait --parsable --output=bad.out " + script +
                                      " -n 2 " + kModel + " --dp 3 --tp 2");
  const std::string bad = read_file(cluster.dir() + "/bad.out");
  EXPECT_TRUE(refused.exit_code == 2 || refused.exit_code == 143) << refused.exit_code << bad;
  EXPECT_EQ(bad.find("cannot open"), std::string::npos) << bad;
  EXPECT_EQ(bad.find("partrain merge"), std::string::npos) << bad;
}

TEST(ClusterSlurm, SeveralTasksOnANodeOrTheBatchScriptAreRefusedWithTheFix) {
  PARTRAIN_START_CLUSTER(cluster, 2);
  // Two tasks on one node would each take themselves for node 0 of 1.
  CommandResult crowded = cluster.run(
      "srun --overcommit -N1 -n2 partrain launch -n 2 --no-trace " + kModel);
  EXPECT_EQ(crowded.exit_code, 2) << crowded.err;
  EXPECT_NE(crowded.err.find("Slurm started 2 tasks on this node (SLURM_STEP_TASKS_PER_NODE=2)"),
            std::string::npos)
      << crowded.err;
  EXPECT_NE(crowded.err.find("srun --ntasks-per-node=1 partrain launch -n 2"), std::string::npos)
      << crowded.err;

  // The batch script runs on the first node only; node 1 would never join.
  CommandResult batch = cluster.run(
      "sbatch --wait -N2 --output=batch.out --wrap 'partrain launch -n 1 --no-trace -- true'");
  const std::string output = read_file(cluster.dir() + "/batch.out");
  EXPECT_NE(batch.exit_code, 0) << output;
  EXPECT_NE(output.find("this is the batch script"), std::string::npos) << output;
  EXPECT_NE(output.find("srun --ntasks-per-node=1 partrain launch"), std::string::npos) << output;
}

}  // namespace
}  // namespace partrain::testing
