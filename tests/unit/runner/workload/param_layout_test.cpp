#include "runner/workload/param_layout.h"

#include <gtest/gtest.h>

#include <set>

#include "runner/workload/gpt_specs.h"

namespace partrain::runner {
namespace {

// Every global element of a tensor-parallel parameter is held by exactly one tp rank.
void expect_shards_tile(const ParamSpec& spec, int tp) {
  std::set<int64_t> seen;
  int64_t global = 1;
  for (int64_t d : spec.shape) global *= d;
  for (int rank = 0; rank < tp; ++rank) {
    std::vector<int64_t> shape = local_shape(spec, {rank, tp});
    int64_t local = 1;
    for (int64_t d : shape) local *= d;
    for (int64_t i = 0; i < local; ++i) {
      int64_t g = global_index(spec, {rank, tp}, i);
      ASSERT_GE(g, 0);
      ASSERT_LT(g, global);
      EXPECT_TRUE(seen.insert(g).second) << spec.name << " element " << g << " held twice";
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), global) << spec.name;
}

TEST(ParamLayout, TensorParallelShardsTileEveryTensor) {
  WorkloadModel model{2, 8, 4, 6, 12, 16};
  for (int tp : {1, 2, 4}) {
    for (const ParamSpec& spec : gpt_block_specs(model, 1)) {
      if (spec.split != TpSplit::kReplicated) expect_shards_tile(spec, tp);
    }
    expect_shards_tile(gpt_embedding_specs(model).front(), tp);
  }
}

TEST(ParamLayout, QkvShardHoldsItsHeadsOfQAndKAndV) {
  // C = 8, 2 ranks: rank 1 holds rows 4-7 of Q, 12-15 (K) and 20-23 (V).
  ParamSpec qkv{"qkvw", 1, {24, 8}, TpSplit::kQkv, InitKind::kNormal, false};
  EXPECT_EQ(local_shape(qkv, {1, 2}), (std::vector<int64_t>{12, 8}));
  EXPECT_EQ(global_index(qkv, {1, 2}, 0), 4 * 8);
  EXPECT_EQ(global_index(qkv, {1, 2}, 4 * 8), 12 * 8);
  EXPECT_EQ(global_index(qkv, {1, 2}, 8 * 8 + 3), 20 * 8 + 3);
  ParamSpec row{"proj", 2, {8, 8}, TpSplit::kRow, InitKind::kNormal, false};
  EXPECT_EQ(global_index(row, {1, 2}, 5), 1 * 8 + 4 + 1);  // local (1, 1): global (1, 4 + 1)
}

TEST(ParamLayout, InitialValuesDependOnGlobalPositionOnly) {
  WorkloadModel model{2, 8, 4, 6, 12, 16};
  ParamLayout whole, half;
  whole.add_unit("layer1", 0, gpt_block_specs(model, 1), {0, 1});
  half.add_unit("layer1", 0, gpt_block_specs(model, 1), {1, 2});
  const std::vector<float> a = whole.unit_initial_values(0, 7, 2, {0, 1});
  const std::vector<float> b = half.unit_initial_values(0, 7, 2, {1, 2});
  ASSERT_EQ(a.size(), static_cast<size_t>(whole.numel()));
  ASSERT_EQ(b.size(), static_cast<size_t>(half.numel()));
  const LocalParam* fc_whole = whole.find("layer1.fcw");
  const LocalParam* fc_half = half.find("layer1.fcw");
  ASSERT_NE(fc_whole, nullptr);
  ASSERT_NE(fc_half, nullptr);
  // fcw is column-parallel: rank 1 of 2 holds rows 8-15 of the (16, 8) weight.
  for (int64_t i = 0; i < fc_half->numel; ++i) {
    EXPECT_EQ(b[static_cast<size_t>(fc_half->offset + i)],
              a[static_cast<size_t>(fc_whole->offset + 8 * 8 + i)]);
  }
  EXPECT_EQ(a[static_cast<size_t>(whole.find("layer1.ln1w")->offset)], 1.0f);
  EXPECT_EQ(a[static_cast<size_t>(whole.find("layer1.qkvb")->offset)], 0.0f);
}

TEST(ParamLayout, UnitsAreContiguousInForwardOrder) {
  WorkloadModel model{2, 8, 4, 6, 12, 32};  // ffn = 4h
  ParamLayout layout;
  layout.add_unit("embedding", 0, gpt_embedding_specs(model), {0, 1});
  layout.add_unit("layer0", 0, gpt_block_specs(model, 0), {0, 1});
  layout.add_unit("final", 0, gpt_final_specs(model), {0, 1});
  int64_t offset = 0;
  for (const ParamUnit& unit : layout.units()) {
    EXPECT_EQ(unit.offset, offset);
    offset += unit.numel;
  }
  EXPECT_EQ(offset, layout.numel());
  // 12 h^2 + 13 h per block (DESIGN.md "Formulas"), with h = 8 and ffn = 4h.
  EXPECT_EQ(layout.units()[1].numel, 12 * 64 + 13 * 8);
}

}  // namespace
}  // namespace partrain::runner
