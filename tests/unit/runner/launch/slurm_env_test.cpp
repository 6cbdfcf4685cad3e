#include "runner/launch/slurm_env.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/support/fake_env.h"

namespace partrain::launch {
namespace {

using Hosts = std::vector<std::string>;
using partrain::testing::Env;
using partrain::testing::fake_env;

// A task of `srun -N<nodes> --ntasks-per-node=<per_node>` on node `node` of hosts gpu[07-...],
// the step's list as long as its count (the job's 4 nodes long).
Env step_task(int node, int nodes, const std::string& tasks_per_node) {
  const std::string step_list = nodes == 1 ? "gpu07"
                                           : "gpu[07-" + std::string(nodes + 6 < 10 ? "0" : "") +
                                                 std::to_string(nodes + 6) + "]";
  return {{"SLURM_JOB_ID", "81"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", std::to_string(node)},
          {"SLURM_NODEID", std::to_string(node)},
          {"SLURM_NNODES", std::to_string(nodes)},
          {"SLURM_STEP_NUM_NODES", std::to_string(nodes)},
          {"SLURM_JOB_NODELIST", "gpu[07-10]"},
          {"SLURM_STEP_NODELIST", step_list},
          {"SLURM_STEP_TASKS_PER_NODE", tasks_per_node}};
}

TEST(ExpandNodelist, PlainHosts) {
  auto hosts = expand_nodelist("a12,b7");
  ASSERT_TRUE(hosts.is_ok());
  EXPECT_EQ(*hosts, (Hosts{"a12", "b7"}));
}

TEST(ExpandNodelist, RangesKeepZeroPadding) {
  auto hosts = expand_nodelist("node[01-03,07],gpu5");
  ASSERT_TRUE(hosts.is_ok()) << hosts.status().message();
  EXPECT_EQ(*hosts, (Hosts{"node01", "node02", "node03", "node07", "gpu5"}));
}

TEST(ExpandNodelist, PaddingCrossesDecade) {
  auto hosts = expand_nodelist("n[098-101]");
  ASSERT_TRUE(hosts.is_ok());
  EXPECT_EQ(*hosts, (Hosts{"n098", "n099", "n100", "n101"}));
}

TEST(ExpandNodelist, SeveralBracketGroupsAndSuffix) {
  auto hosts = expand_nodelist("rack[1-2]-n[3,5]-ib");
  ASSERT_TRUE(hosts.is_ok());
  EXPECT_EQ(*hosts, (Hosts{"rack1-n3-ib", "rack1-n5-ib", "rack2-n3-ib", "rack2-n5-ib"}));
}

TEST(ExpandNodelist, MalformedListsAreErrorsNamingTheList) {
  for (const char* bad : {"node[01-03", "node[a-b]", "node[5-2]", "node]1"}) {
    auto hosts = expand_nodelist(bad);
    ASSERT_FALSE(hosts.is_ok()) << bad;
    EXPECT_EQ(hosts.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(hosts.status().message().find(bad), std::string::npos) << hosts.status().message();
  }
}

TEST(ExpandTasksPerNode, CountsAndRepeats) {
  auto tasks = expand_tasks_per_node("2(x3),1");
  ASSERT_TRUE(tasks.is_ok()) << tasks.status().message();
  EXPECT_EQ(*tasks, (std::vector<int>{2, 2, 2, 1}));
  auto single = expand_tasks_per_node("4");
  ASSERT_TRUE(single.is_ok());
  EXPECT_EQ(*single, (std::vector<int>{4}));
}

TEST(ExpandTasksPerNode, MalformedListsAreErrorsNamingTheItem) {
  for (const char* bad : {"", "x", "2(x)", "2(x0)", "2(x3", "-1", "1,(x2)"}) {
    auto tasks = expand_tasks_per_node(bad);
    ASSERT_FALSE(tasks.is_ok()) << bad;
    EXPECT_EQ(tasks.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DetectSlurm, OutsideATaskIsNoSlurm) {
  // An salloc shell has the allocation's variables but is no task.
  auto placement = detect_slurm(fake_env({{"SLURM_JOB_ID", "4"}, {"SLURM_NNODES", "3"}}));
  ASSERT_TRUE(placement.is_ok());
  EXPECT_FALSE(placement->has_value());
}

TEST(DetectSlurm, StepNodeAndMasterFromTheNodelist) {
  auto placement = detect_slurm(fake_env(step_task(2, 4, "1(x4)")));
  ASSERT_TRUE(placement.is_ok()) << placement.status().message();
  ASSERT_TRUE(placement->has_value());
  const ClusterPlacement& p = **placement;
  EXPECT_EQ(p.engine, "Slurm");
  EXPECT_EQ(p.node_rank, 2);
  EXPECT_EQ(p.node_rank_from, "SLURM_NODEID");
  EXPECT_EQ(p.nnodes, 4);
  EXPECT_EQ(p.master_addr, "gpu07");
  EXPECT_EQ(p.master_from, "the first host of SLURM_STEP_NODELIST=gpu[07-10]");
  EXPECT_FALSE(p.refusal.has_value());
}

TEST(DetectSlurm, AStepOnPartOfTheAllocationCountsItsOwnNodes) {
  // `srun -N2 -r1` in a 3-node allocation: SLURM_NODEID counts within the step, whose first host
  // is node2, not the job's node1 (as Slurm 22.05 sets them).
  auto placement = detect_slurm(fake_env({{"SLURM_STEP_ID", "0"},
                                          {"SLURM_PROCID", "1"},
                                          {"SLURM_NODEID", "1"},
                                          {"SLURM_NNODES", "2"},
                                          {"SLURM_STEP_NUM_NODES", "2"},
                                          {"SLURM_JOB_NODELIST", "node[1-3]"},
                                          {"SLURM_STEP_NODELIST", "node[2-3]"}}));
  ASSERT_TRUE(placement.is_ok());
  EXPECT_EQ((*placement)->nnodes, 2);
  EXPECT_EQ((*placement)->node_rank, 1);
  EXPECT_EQ((*placement)->master_addr, "node2");
}

TEST(DetectSlurm, SeveralTasksOnThisNodeAreRefusedWithTheFix) {
  // srun --overcommit -N1 -n2: both tasks would be "node 0 of 1".
  Env env = step_task(0, 1, "2");
  env["SLURM_PROCID"] = "1";
  env["SLURM_LOCALID"] = "1";
  auto placement = detect_slurm(fake_env(env));
  ASSERT_TRUE(placement.is_ok()) << placement.status().message();
  ASSERT_TRUE((*placement)->refusal.has_value());
  const std::string& why = *(*placement)->refusal;
  EXPECT_NE(why.find("2 tasks on this node (SLURM_STEP_TASKS_PER_NODE=2)"), std::string::npos)
      << why;
  EXPECT_NE(why.find("srun --ntasks-per-node=1 partrain launch -n 2"), std::string::npos) << why;
}

// 2 tasks on node 0, 1 on node 1 (srun -N2 -n3): node 0's launchers refuse, and node 1, which
// would wait for them until the rendezvous timed out (5 min), refuses at once too.
TEST(DetectSlurm, EveryNodeRefusesWhenAnyNodeHasSeveralTasks) {
  auto first = detect_slurm(fake_env(step_task(0, 2, "2,1")));
  ASSERT_TRUE(first.is_ok());
  ASSERT_TRUE((*first)->refusal.has_value());
  EXPECT_NE((*first)->refusal->find("2 tasks on this node"), std::string::npos);
  auto second = detect_slurm(fake_env(step_task(1, 2, "2,1")));
  ASSERT_TRUE(second.is_ok());
  ASSERT_TRUE((*second)->refusal.has_value());
  EXPECT_NE((*second)->refusal->find("Slurm started 2 tasks on node 0 of this step "
                                     "(SLURM_STEP_TASKS_PER_NODE=2,1)"),
            std::string::npos)
      << *(*second)->refusal;
  auto even = detect_slurm(fake_env(step_task(1, 2, "1(x2)")));
  ASSERT_TRUE(even.is_ok());
  EXPECT_FALSE((*even)->refusal.has_value());
}

TEST(DetectSlurm, TheBatchScriptIsOneNodeAndRefusedOnSeveral) {
  // sbatch's script: SLURM_PROCID=0 but no step.
  Env batch = {{"SLURM_JOB_ID", "3"},       {"SLURM_PROCID", "0"},
               {"SLURM_NODEID", "0"},       {"SLURM_NNODES", "2"},
               {"SLURM_JOB_NODELIST", "node[1-2]"}, {"SLURM_TASKS_PER_NODE", "1(x2)"}};
  auto several = detect_slurm(fake_env(batch));
  ASSERT_TRUE(several.is_ok());
  ASSERT_TRUE((*several)->refusal.has_value());
  EXPECT_NE((*several)->refusal->find("batch script"), std::string::npos);
  EXPECT_NE((*several)->refusal->find("srun --ntasks-per-node=1"), std::string::npos);
  EXPECT_EQ((*several)->nnodes, 1);

  batch["SLURM_NNODES"] = "1";
  batch["SLURM_JOB_NODELIST"] = "node1";
  auto one = detect_slurm(fake_env(batch));
  ASSERT_TRUE(one.is_ok());
  EXPECT_FALSE((*one)->refusal.has_value());
  EXPECT_EQ((*one)->nnodes, 1);
}

TEST(DetectSlurm, MalformedOrInconsistentVariablesAreNamed) {
  auto bad_id = detect_slurm(fake_env({{"SLURM_PROCID", "x1"}}));
  ASSERT_FALSE(bad_id.is_ok());
  EXPECT_NE(bad_id.status().message().find("SLURM_PROCID"), std::string::npos);

  auto beyond = detect_slurm(fake_env(step_task(3, 2, "1(x2)")));
  ASSERT_FALSE(beyond.is_ok());
  EXPECT_NE(beyond.status().message().find("SLURM_NODEID"), std::string::npos);

  Env short_list = step_task(1, 2, "1");
  auto no_entry = detect_slurm(fake_env(short_list));
  ASSERT_FALSE(no_entry.is_ok());
  EXPECT_NE(no_entry.status().message().find("SLURM_STEP_TASKS_PER_NODE"), std::string::npos);

  Env bad_list = step_task(0, 2, "1(x2)");
  bad_list["SLURM_STEP_NODELIST"] = "gpu[07-";
  auto unmatched = detect_slurm(fake_env(bad_list));
  ASSERT_FALSE(unmatched.is_ok());
  EXPECT_NE(unmatched.status().message().find("gpu[07-"), std::string::npos);

  // A count the step's list does not hold: this node would wait for nodes that never start.
  Env miscounted = step_task(0, 2, "1(x2)");
  miscounted["SLURM_STEP_NUM_NODES"] = "3";
  auto waits = detect_slurm(fake_env(miscounted));
  ASSERT_TRUE(waits.is_ok()) << waits.status().message();
  ASSERT_TRUE((*waits)->refusal.has_value());  // unless --nnodes and --node-rank place it
  EXPECT_NE((*waits)->refusal->find(
                "SLURM_STEP_NUM_NODES=3 but SLURM_STEP_NODELIST='gpu[07-08]' lists 2 node(s)"),
            std::string::npos)
      << *(*waits)->refusal;
}

}  // namespace
}  // namespace partrain::launch
