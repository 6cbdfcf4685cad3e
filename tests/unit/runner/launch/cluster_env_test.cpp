#include "runner/launch/cluster_env.h"

#include <gtest/gtest.h>

#include <map>

namespace partrain::launch {
namespace {

using Hosts = std::vector<std::string>;

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
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

TEST(DetectCluster, NothingSetMeansNoEngine) {
  auto placement = detect_cluster(fake_env({{"HOME", "/root"}}));
  ASSERT_TRUE(placement.is_ok());
  EXPECT_FALSE(placement->has_value());
}

TEST(DetectCluster, SlurmNodeAndMasterFromTheNodelist) {
  auto placement = detect_cluster(fake_env({{"SLURM_PROCID", "2"},
                                            {"SLURM_NODEID", "2"},
                                            {"SLURM_NNODES", "4"},
                                            {"SLURM_JOB_NODELIST", "gpu[07-10]"}}));
  ASSERT_TRUE(placement.is_ok()) << placement.status().message();
  ASSERT_TRUE(placement->has_value());
  EXPECT_EQ((*placement)->engine, "Slurm");
  EXPECT_EQ((*placement)->node_rank, 2);
  EXPECT_EQ((*placement)->nnodes, 4);
  EXPECT_EQ((*placement)->master_addr, "gpu07");
}

TEST(DetectCluster, SlurmStepNodeCountWinsOverTheAllocation) {
  auto placement = detect_cluster(fake_env({{"SLURM_PROCID", "0"},
                                            {"SLURM_NNODES", "8"},
                                            {"SLURM_STEP_NUM_NODES", "2"},
                                            {"SLURM_STEP_NODELIST", "a[3-4]"}}));
  ASSERT_TRUE(placement.is_ok());
  EXPECT_EQ((*placement)->nnodes, 2);
  EXPECT_EQ((*placement)->master_addr, "a3");
}

TEST(DetectCluster, OpenMpiAndPmi) {
  auto ompi = detect_cluster(
      fake_env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"}}));
  ASSERT_TRUE(ompi.is_ok());
  EXPECT_EQ((*ompi)->engine, "Open MPI");
  EXPECT_EQ((*ompi)->node_rank, 1);
  EXPECT_EQ((*ompi)->nnodes, 3);
  EXPECT_FALSE((*ompi)->master_addr.has_value());

  auto pmi = detect_cluster(fake_env({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}));
  ASSERT_TRUE(pmi.is_ok());
  EXPECT_EQ((*pmi)->engine, "PMI");
  EXPECT_EQ((*pmi)->nnodes, 2);
}

TEST(DetectCluster, MalformedVariableIsNamed) {
  auto placement = detect_cluster(fake_env({{"SLURM_PROCID", "x1"}}));
  ASSERT_FALSE(placement.is_ok());
  EXPECT_NE(placement.status().message().find("SLURM_PROCID"), std::string::npos);

  auto out_of_range = detect_cluster(fake_env({{"PMI_RANK", "4"}, {"PMI_SIZE", "4"}}));
  ASSERT_FALSE(out_of_range.is_ok());
  EXPECT_NE(out_of_range.status().message().find("PMI_RANK"), std::string::npos);
}

}  // namespace
}  // namespace partrain::launch
