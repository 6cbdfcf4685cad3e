#include "runner/launch/cluster_env.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/support/fake_env.h"

namespace partrain::launch {
namespace {

using partrain::testing::Env;
using partrain::testing::fake_env;

// A probe whose PMIx server places rank 0 on `rank0_host` (an error when empty), counting asks.
struct FakeProbe {
  Env env;
  std::string rank0_host;
  int pmix_asks = 0;

  ClusterProbe probe() {
    return {fake_env(env), [this](uint32_t rank) -> StatusOr<std::string> {
              ++pmix_asks;
              if (rank0_host.empty()) return unavailable("libpmix.so.2 could not be loaded");
              if (rank != 0) return failed("only rank 0 is known");
              return rank0_host;
            }};
  }
};

// A process of `mpirun -np <size> --map-by ppr:1:node` (Open MPI 4.1's variables).
Env open_mpi_process(int rank, int size, int local_size = 1) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)},
          {"OMPI_COMM_WORLD_NODE_RANK", "0"},
          {"OMPI_MCA_orte_hnp_uri", "1267400704.0;tcp://10.77.0.1:54785"},
          {"PMIX_NAMESPACE", "1267400705"},
          {"PMIX_RANK", std::to_string(rank)}};
}

Env slurm_task(int node, int nodes, const std::string& tasks_per_node = "1(x2)") {
  return {{"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", std::to_string(node)},
          {"SLURM_NODEID", std::to_string(node)},
          {"SLURM_NNODES", std::to_string(nodes)},
          {"SLURM_STEP_NUM_NODES", std::to_string(nodes)},
          {"SLURM_STEP_NODELIST", nodes == 1 ? "gpu07" : "gpu[07-08]"},
          {"SLURM_STEP_TASKS_PER_NODE", tasks_per_node}};
}

TEST(DetectCluster, NothingSetMeansNoEngine) {
  auto placement = detect_cluster(fake_env({{"HOME", "/root"}}));
  ASSERT_TRUE(placement.is_ok());
  EXPECT_FALSE(placement->has_value());
}

TEST(DetectCluster, OpenMpiRankAndSizeAreTheNodeRankAndCountWithMasterFromPmix) {
  auto ompi = detect_cluster(fake_env(open_mpi_process(1, 3)));
  ASSERT_TRUE(ompi.is_ok()) << ompi.status().message();
  EXPECT_EQ((*ompi)->engine, "Open MPI");
  EXPECT_EQ((*ompi)->node_rank, 1);
  EXPECT_EQ((*ompi)->nnodes, 3);
  // Not the HNP URI's host: that is mpirun's, which need not be rank 0's.
  EXPECT_FALSE((*ompi)->master_addr.has_value());
  EXPECT_TRUE((*ompi)->master_from_pmix);
  EXPECT_FALSE((*ompi)->refusal.has_value());
}

TEST(DetectCluster, OpenMpiWithSeveralProcessesOnANodeIsRefused) {
  // `mpirun -np 2 partrain launch` on one host.
  auto ompi = detect_cluster(fake_env(open_mpi_process(0, 2, 2)));
  ASSERT_TRUE(ompi.is_ok());
  ASSERT_TRUE((*ompi)->refusal.has_value());
  EXPECT_NE((*ompi)->refusal->find("OMPI_COMM_WORLD_LOCAL_SIZE=2"), std::string::npos);
  EXPECT_NE((*ompi)->refusal->find("--map-by ppr:1:node"), std::string::npos);
}

TEST(DetectCluster, OpenMpiWinsOverTheSlurmStepOfItsDaemons) {
  // mpirun inside an allocation starts its daemons with srun; their variables are inherited.
  Env env = open_mpi_process(1, 2);
  for (const auto& [name, value] : slurm_task(0, 1, "1")) env[name] = value;
  auto placement = detect_cluster(fake_env(env));
  ASSERT_TRUE(placement.is_ok());
  EXPECT_EQ((*placement)->engine, "Open MPI");
  EXPECT_EQ((*placement)->node_rank, 1);
}

TEST(DetectCluster, HydraAndPmi) {
  auto hydra = detect_cluster(fake_env({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"},
                                        {"MPI_LOCALNRANKS", "1"}, {"SLURM_PROCID", "0"},
                                        {"SLURM_STEP_ID", "0"}}));
  ASSERT_TRUE(hydra.is_ok()) << hydra.status().message();
  EXPECT_EQ((*hydra)->engine, "MPICH (Hydra)");
  EXPECT_EQ((*hydra)->node_rank, 1);
  EXPECT_FALSE((*hydra)->master_from_pmix);

  auto crowded = detect_cluster(fake_env({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"},
                                          {"MPI_LOCALNRANKS", "4"}}));
  ASSERT_TRUE(crowded.is_ok());
  ASSERT_TRUE((*crowded)->refusal.has_value());
  EXPECT_NE((*crowded)->refusal->find("-ppn 1"), std::string::npos);

  auto pmi = detect_cluster(fake_env({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}));
  ASSERT_TRUE(pmi.is_ok());
  EXPECT_EQ((*pmi)->engine, "PMI");
  EXPECT_EQ((*pmi)->nnodes, 2);
}

TEST(DetectCluster, SlurmBeforeABarePmiRank) {
  // srun --mpi=pmi2 sets PMI_RANK beside Slurm's own, which name the master.
  Env env = slurm_task(1, 2);
  env["PMI_RANK"] = "1";
  env["PMI_SIZE"] = "2";
  auto placement = detect_cluster(fake_env(env));
  ASSERT_TRUE(placement.is_ok());
  EXPECT_EQ((*placement)->engine, "Slurm");
  EXPECT_EQ((*placement)->master_addr, "gpu07");
}

TEST(DetectCluster, MalformedOrInconsistentVariablesAreNamed) {
  auto bad = detect_cluster(fake_env({{"OMPI_COMM_WORLD_RANK", "one"},
                                      {"OMPI_COMM_WORLD_SIZE", "2"}}));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("OMPI_COMM_WORLD_RANK='one'"), std::string::npos);

  auto out_of_range = detect_cluster(fake_env({{"PMI_RANK", "4"}, {"PMI_SIZE", "4"}}));
  ASSERT_FALSE(out_of_range.is_ok());
  EXPECT_NE(out_of_range.status().message().find("PMI_RANK"), std::string::npos);
}

TEST(PlaceNode, NoEngineNoFlagsIsOneNodeOnLoopback) {
  FakeProbe fake{{{"MASTER_ADDR", "elsewhere"}}, ""};
  auto placement = place_node({}, fake.probe());
  ASSERT_TRUE(placement.is_ok());
  EXPECT_EQ(placement->nnodes, 1);
  EXPECT_EQ(placement->node_rank, 0);
  // A MASTER_ADDR left over from a multi-node job is not this node's rendezvous.
  EXPECT_EQ(placement->master_addr, "127.0.0.1");
  EXPECT_TRUE(placement->engine.empty());
}

TEST(PlaceNode, SlurmPlacesTheNodeWithoutFlags) {
  FakeProbe fake{slurm_task(1, 2), ""};
  auto placement = place_node({}, fake.probe());
  ASSERT_TRUE(placement.is_ok()) << placement.status().message();
  EXPECT_EQ(placement->nnodes, 2);
  EXPECT_EQ(placement->node_rank, 1);
  EXPECT_EQ(placement->master_addr, "gpu07");
  EXPECT_EQ(placement->engine, "Slurm");
  EXPECT_EQ(fake.pmix_asks, 0);
}

TEST(PlaceNode, FlagsWinOverTheEngine) {
  FakeProbe fake{slurm_task(1, 2), ""};
  auto placement = place_node({4, 3, "head"}, fake.probe());
  ASSERT_TRUE(placement.is_ok());
  EXPECT_EQ(placement->nnodes, 4);
  EXPECT_EQ(placement->node_rank, 3);
  EXPECT_EQ(placement->master_addr, "head");
}

TEST(PlaceNode, AnEngineRefusalStandsUnlessTheFlagsPlaceTheLauncher) {
  FakeProbe fake{slurm_task(0, 1, "2"), ""};
  auto refused = place_node({}, fake.probe());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().exit_code(), 2);
  EXPECT_NE(refused.status().message().find("--ntasks-per-node=1"), std::string::npos);
  // --nnodes alone leaves the node rank to the engine: still refused.
  EXPECT_FALSE(place_node({2, std::nullopt, std::nullopt}, fake.probe()).is_ok());

  auto by_hand = place_node({2, 1, std::nullopt}, fake.probe());
  ASSERT_TRUE(by_hand.is_ok()) << by_hand.status().message();
  EXPECT_EQ(by_hand->node_rank, 1);
  EXPECT_EQ(by_hand->master_addr, "gpu07");  // the engine still names the master
}

TEST(PlaceNode, AnEngineNodeRankBeyondFlaggedNnodesNamesBoth) {
  FakeProbe fake{slurm_task(1, 2), ""};
  auto placement = place_node({1, std::nullopt, std::nullopt}, fake.probe());
  ASSERT_TRUE(placement.is_ok());  // --nnodes 1: one node, rank 0
  EXPECT_EQ(placement->node_rank, 0);

  Env four = slurm_task(3, 4, "1(x4)");
  four["SLURM_STEP_NODELIST"] = "gpu[07-10]";
  FakeProbe beyond{four, ""};
  auto refused = place_node({2, std::nullopt, std::nullopt}, beyond.probe());
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("node 3 (SLURM_NODEID), outside --nnodes 2"),
            std::string::npos)
      << refused.status().message();
}

TEST(PlaceNode, FlaggedNodeRankOutOfRangeNamesTheFlag) {
  FakeProbe fake{{}, ""};
  auto placement = place_node({2, 2, "head"}, fake.probe());
  ASSERT_FALSE(placement.is_ok());
  EXPECT_NE(placement.status().message().find("--node-rank 2 is outside 0..1"),
            std::string::npos);
  auto zero = place_node({0, std::nullopt, std::nullopt}, fake.probe());
  ASSERT_FALSE(zero.is_ok());
  EXPECT_NE(zero.status().message().find("--nnodes must be at least 1"), std::string::npos);
}

TEST(PlaceNode, OpenMpiMasterIsRankZerosHostFromPmix) {
  FakeProbe fake{open_mpi_process(1, 2), "node2"};
  auto placement = place_node({}, fake.probe());
  ASSERT_TRUE(placement.is_ok()) << placement.status().message();
  EXPECT_EQ(placement->nnodes, 2);
  EXPECT_EQ(placement->node_rank, 1);
  EXPECT_EQ(placement->master_addr, "node2");
  EXPECT_EQ(fake.pmix_asks, 1);

  // Given --master-addr, PMIx is not asked.
  FakeProbe flagged{open_mpi_process(1, 2), "node2"};
  auto with_flag = place_node({std::nullopt, std::nullopt, "head"}, flagged.probe());
  ASSERT_TRUE(with_flag.is_ok());
  EXPECT_EQ(with_flag->master_addr, "head");
  EXPECT_EQ(flagged.pmix_asks, 0);
}

TEST(PlaceNode, OpenMpiWithoutPmixNamesTheFlagAndWhy) {
  FakeProbe fake{open_mpi_process(0, 2), ""};
  auto placement = place_node({}, fake.probe());
  ASSERT_FALSE(placement.is_ok());
  EXPECT_EQ(placement.status().exit_code(), 2);
  const std::string& message = placement.status().message();
  EXPECT_NE(message.find("pass --master-addr"), std::string::npos) << message;
  EXPECT_NE(message.find("libpmix.so.2 could not be loaded"), std::string::npos) << message;

  // MASTER_ADDR, set for every process (mpirun -x MASTER_ADDR), does instead.
  Env env = open_mpi_process(0, 2);
  env["MASTER_ADDR"] = "node1";
  FakeProbe exported{env, ""};
  auto from_env = place_node({}, exported.probe());
  ASSERT_TRUE(from_env.is_ok());
  EXPECT_EQ(from_env->master_addr, "node1");
}

TEST(PlaceNode, HydraNamesNoHost) {
  FakeProbe fake{{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALNRANKS", "1"}}, "node9"};
  auto placement = place_node({}, fake.probe());
  ASSERT_FALSE(placement.is_ok());
  EXPECT_NE(placement.status().message().find("MPICH (Hydra)'s variables name no host"),
            std::string::npos)
      << placement.status().message();
  EXPECT_EQ(fake.pmix_asks, 0);
}

}  // namespace
}  // namespace partrain::launch
