#include "runner/workload/unit_shards.h"

#include <gtest/gtest.h>

namespace partrain::runner {
namespace {

ParamLayout layout_of(const std::vector<int64_t>& unit_sizes) {
  ParamLayout layout;
  uint64_t id = 1;
  for (int64_t size : unit_sizes) {
    ParamSpec spec{"p" + std::to_string(id), id, {size}, TpSplit::kReplicated, InitKind::kNormal,
                   false};
    layout.add_unit("u" + std::to_string(id), 0, {spec}, TpShard{});
    ++id;
  }
  return layout;
}

TEST(UnitShards, EachUnitIsPaddedToAMultipleOfDp) {
  ParamLayout layout = layout_of({10, 3, 8});
  UnitShards shards(layout, 3, 1);
  EXPECT_EQ(shards.unit(0).shard, 4);
  EXPECT_EQ(shards.unit(1).shard, 1);
  EXPECT_EQ(shards.unit(2).shard, 3);
  EXPECT_EQ(shards.shard_numel(), 8);
  EXPECT_EQ(shards.padded_numel(), 24);
  EXPECT_EQ(shards.unit(1).padded_offset, 12);
  EXPECT_EQ(shards.unit(2).shard_offset, 5);
}

TEST(UnitShards, EveryRealElementHasExactlyOneOwner) {
  ParamLayout layout = layout_of({10, 3, 8, 1});
  for (int dp : {1, 2, 3, 4}) {
    for (size_t u = 0; u < layout.units().size(); ++u) {
      std::vector<int> owners(static_cast<size_t>(layout.units()[u].numel), 0);
      for (int rank = 0; rank < dp; ++rank) {
        const UnitShard s = UnitShards(layout, dp, rank).unit(u);  // a copy of a temporary's
        EXPECT_LE(s.owned_end - s.owned_begin, s.shard);
        for (int64_t i = s.owned_begin; i < s.owned_end; ++i) ++owners[static_cast<size_t>(i)];
      }
      for (int count : owners) EXPECT_EQ(count, 1) << "dp " << dp << " unit " << u;
    }
  }
}

}  // namespace
}  // namespace partrain::runner
