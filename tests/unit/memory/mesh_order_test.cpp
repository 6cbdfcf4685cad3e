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

}  // namespace
}  // namespace partrain::memory
