#include "runner/workload/mesh.h"

#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "tests/unit/runner/comm/gloo_world.h"

namespace partrain::runner {
namespace {

ResolvedLayout layout_of(int dp, int tp, int pp) {
  ResolvedLayout layout;
  layout.layout.dp = dp;
  layout.layout.tp = tp;
  layout.layout.pp = pp;
  return layout;
}

TEST(MeshCoords, TensorParallelIsFastestThenDataThenPipeline) {
  const TrainingLayout layout = layout_of(2, 2, 2).layout;
  EXPECT_EQ(memory::mesh_coords(0, layout).tp, 0);
  EXPECT_EQ(memory::mesh_coords(1, layout).tp, 1);
  EXPECT_EQ(memory::mesh_coords(2, layout).dp, 1);
  EXPECT_EQ(memory::mesh_coords(4, layout).pp, 1);
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(memory::mesh_rank(memory::mesh_coords(rank, layout), layout), rank);
  }
}

TEST(Mesh, GroupsHoldTheRanksSharingTheOtherCoordinates) {
  ResolvedLayout layout = layout_of(2, 2, 2);
  std::mutex mutex;
  std::set<std::vector<int>> tp_groups, dp_groups, pp_groups;
  comm::testing::run_world(8, [&](int rank, comm::Comm& world) {
    auto mesh = Mesh::build(world, layout);
    ASSERT_TRUE(mesh.is_ok()) << mesh.status().message();
    EXPECT_EQ(mesh->tp().rank(), mesh->coords().tp);
    EXPECT_EQ(mesh->dp().rank(), mesh->coords().dp);
    EXPECT_EQ(mesh->pp().rank(), mesh->coords().pp);
    // A collective over the tp group sums exactly its members' world ranks.
    int64_t value = rank;
    ASSERT_TRUE(mesh->tp().all_reduce(&value, &value, 1, comm::DType::kI64,
                                      comm::ReduceOp::kSum).is_ok());
    const auto& members = mesh->tp().world_ranks();
    EXPECT_EQ(value, members[0] + members[1]);
    {
      std::lock_guard lock(mutex);
      tp_groups.insert(mesh->tp().world_ranks());
      dp_groups.insert(mesh->dp().world_ranks());
      pp_groups.insert(mesh->pp().world_ranks());
    }
    // The mesh's communicators stay up until every rank has built its own (see run_world).
    EXPECT_TRUE(world.barrier().is_ok());
  });
  EXPECT_EQ(tp_groups, (std::set<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(dp_groups, (std::set<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(pp_groups, (std::set<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

}  // namespace
}  // namespace partrain::runner
