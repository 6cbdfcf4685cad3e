#include "memory/mesh_order.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

namespace partrain::memory {
namespace {

TrainingLayout layout_of(int tp, int cp, int dp, int pp) {
  TrainingLayout l;
  l.tp = tp;
  l.cp = cp;
  l.dp = dp;
  l.pp = pp;
  return l;
}

// The groups along `axis`: the ranks that share every other coordinate.
std::set<std::vector<int>> groups(MeshAxis axis, const TrainingLayout& l) {
  std::map<int, std::vector<int>> by_group;
  for (int rank = 0; rank < layout_ranks(l); ++rank) {
    by_group[mesh_group(rank, axis, l)].push_back(rank);
  }
  std::set<std::vector<int>> out;
  for (auto& [group, ranks] : by_group) out.insert(ranks);
  return out;
}

// Megatron-LM's parallel_state.initialize_model_parallel docstring: 16 GPUs, tp 2, pp 4.
TEST(MeshOrder, MegatronsSixteenGpuExample) {
  const TrainingLayout l = layout_of(2, 1, 2, 4);
  EXPECT_EQ(groups(MeshAxis::kTp, l),
            (std::set<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11},
                                        {12, 13}, {14, 15}}));
  EXPECT_EQ(groups(MeshAxis::kDp, l),
            (std::set<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11},
                                        {12, 14}, {13, 15}}));
  EXPECT_EQ(groups(MeshAxis::kPp, l),
            (std::set<std::vector<int>>{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14},
                                        {3, 7, 11, 15}}));
}

// tp fastest, then cp, dp, pp; coordinates and ranks are inverse; groups are numbered densely.
TEST(MeshOrder, CoordinatesStridesAndGroups) {
  const TrainingLayout l = layout_of(2, 3, 2, 2);
  EXPECT_EQ(mesh_stride(MeshAxis::kTp, l), 1);
  EXPECT_EQ(mesh_stride(MeshAxis::kCp, l), 2);
  EXPECT_EQ(mesh_stride(MeshAxis::kDp, l), 6);
  EXPECT_EQ(mesh_stride(MeshAxis::kPp, l), 12);
  const MeshCoords c = mesh_coords(17, l);  // 17 = 1 x 12 + 0 x 6 + 2 x 2 + 1
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.cp, 2);
  EXPECT_EQ(c.dp, 0);
  EXPECT_EQ(c.pp, 1);
  for (int rank = 0; rank < layout_ranks(l); ++rank) {
    EXPECT_EQ(mesh_rank(mesh_coords(rank, l), l), rank);
    // A pipeline is the ranks of one (tp, cp, dp) position: rank mod tp x cp x dp.
    EXPECT_EQ(mesh_group(rank, MeshAxis::kPp, l), rank % 12);
  }
  const std::pair<MeshAxis, int> sizes[] = {
      {MeshAxis::kTp, 2}, {MeshAxis::kCp, 3}, {MeshAxis::kDp, 2}, {MeshAxis::kPp, 2}};
  for (const auto& [axis, size] : sizes) {
    std::set<int> ids;
    for (int rank = 0; rank < 24; ++rank) ids.insert(mesh_group(rank, axis, l));
    EXPECT_EQ(static_cast<int>(ids.size()), 24 / size);
    EXPECT_EQ(*ids.rbegin(), 24 / size - 1);  // numbered 0 .. groups - 1
    EXPECT_EQ(groups(axis, l).begin()->size(), static_cast<size_t>(size));
  }
}

// A hybrid's shard groups are neighbours in dp x cp; their replicas step over whole groups: with
// tp 2, cp 3 and dp 2 a shard of 3 is one dp rank's cp ranks (2 apart) and its replica is the
// other dp rank's, 6 apart.
TEST(MeshOrder, HybridReplicasStepOverWholeShardGroups) {
  TrainingLayout l = layout_of(2, 3, 2, 2);
  l.zero = 3;
  l.shard = 3;
  EXPECT_EQ(zero_replica_stride(l), 6);
  EXPECT_EQ(zero_replica_stride(l), mesh_stride(MeshAxis::kDp, l));
  l.shard = 0;  // every data rank: one group, replicas would step past the pipeline stage
  EXPECT_EQ(zero_replica_stride(l), 12);
  // The communicators' groups: 24 ranks (tp 2, cp 3, dp 2, pp 2) in shard groups of 3 (8 of
  // them) and replica groups of 2 (12), each rank's place in them its shard and replica index.
  l.shard = 3;
  std::map<int, std::vector<int>> shard_groups, replica_groups;
  for (int rank = 0; rank < layout_ranks(l); ++rank) {
    shard_groups[zero_shard_group(rank, l)].push_back(rank);
    replica_groups[zero_replica_group(rank, l)].push_back(rank);
    const ShardCoords c = shard_coords(mesh_coords(rank, l), l);
    EXPECT_EQ(c.shard, mesh_coords(rank, l).cp);  // dp x cp = 6 in shards of 3: the cp ranks
    EXPECT_EQ(c.replica, mesh_coords(rank, l).dp);
  }
  ASSERT_EQ(shard_groups.size(), 8u);
  ASSERT_EQ(replica_groups.size(), 12u);
  EXPECT_EQ(shard_groups.at(zero_shard_group(0, l)), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(replica_groups.at(zero_replica_group(0, l)), (std::vector<int>{0, 6}));
  EXPECT_EQ(replica_groups.at(zero_replica_group(13, l)), (std::vector<int>{13, 19}));
}

// Expert parallelism subdivides dp x cp, innermost: with tp 2, cp 2, dp 4 (16 ranks a pipeline
// stage) and ep 4, rank 0's ep group is the 4 nearest dp x cp positions of its tp rank, 2 apart
// (ranks 0, 2, 4, 6), and its expert-data group the positions 8 apart that hold the same experts
// (ranks 0, 8).
TEST(MeshOrder, ExpertGroupsSubdivideTheDataParallelRanksInnermost) {
  TrainingLayout l = layout_of(2, 2, 4, 1);
  l.ep = 4;
  EXPECT_EQ(expert_stride(l), 2);
  EXPECT_EQ(expert_data_stride(l), 8);
  EXPECT_EQ(expert_data_ranks(l), 2);
  // Every ep group (ep ranks, expert_stride apart) lies inside one tp rank's dp x cp ranks, and
  // the groups and their expert-data partners tile those ranks.
  std::set<int> covered;
  for (int start : {0, 1, 8, 9}) {
    for (int i = 0; i < l.ep; ++i) {
      const int rank = start + i * expert_stride(l);
      EXPECT_EQ(mesh_coords(rank, l).tp, start % 2);
      covered.insert(rank);
    }
  }
  EXPECT_EQ(covered.size(), 16u);
}

// The communicators' groups (expert_group, expert_data_group) in the same order as the strides.
// tp 2, dp 4, pp 2, ep 2 (16 ranks): the data index of rank r is (r / 2) mod 4; an ep group is
// two neighbouring data-parallel ranks, an expert-data group the ranks two data indices apart.
TEST(MeshOrder, ExpertCommunicatorGroupsFollowTheStrides) {
  TrainingLayout l = layout_of(2, 1, 4, 2);
  l.ep = 2;
  ASSERT_EQ(expert_data_ranks(l), 2);
  std::map<int, std::vector<int>> ep, expert_data;
  for (int rank = 0; rank < layout_ranks(l); ++rank) {
    const ExpertCoords c = expert_coords(mesh_coords(rank, l), l);
    EXPECT_EQ(c.ep, (rank / 2) % 2) << rank;
    EXPECT_EQ(c.expert_data, (rank / 4) % 2) << rank;
    ep[expert_group(rank, l)].push_back(rank);
    expert_data[expert_data_group(rank, l)].push_back(rank);
  }
  // Groups listed in rank order: an ep group's i-th member is ep rank i.
  const std::vector<std::vector<int>> ep_groups = {{0, 2},  {1, 3},  {4, 6},   {5, 7},
                                                   {8, 10}, {9, 11}, {12, 14}, {13, 15}};
  const std::vector<std::vector<int>> data_groups = {{0, 4},  {1, 5},  {2, 6},   {3, 7},
                                                     {8, 12}, {9, 13}, {10, 14}, {11, 15}};
  std::set<std::vector<int>> got_ep, got_data;
  for (auto& [group, ranks] : ep) got_ep.insert(ranks);
  for (auto& [group, ranks] : expert_data) got_data.insert(ranks);
  EXPECT_EQ(got_ep, std::set<std::vector<int>>(ep_groups.begin(), ep_groups.end()));
  EXPECT_EQ(got_data, std::set<std::vector<int>>(data_groups.begin(), data_groups.end()));
  for (const auto& [group, ranks] : ep) EXPECT_EQ(ranks[1] - ranks[0], expert_stride(l));
  for (const auto& [group, ranks] : expert_data) {
    EXPECT_EQ(ranks[1] - ranks[0], expert_data_stride(l));
  }
  EXPECT_EQ(ep.rbegin()->first, 7);  // numbered 0 .. groups - 1
  EXPECT_EQ(expert_data.rbegin()->first, 7);
}

}  // namespace
}  // namespace partrain::memory
