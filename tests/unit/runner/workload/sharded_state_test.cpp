#include "runner/workload/sharded_state.h"

#include <gtest/gtest.h>

#include <vector>

#include "runner/device/cpu_device.h"
#include "tests/unit/runner/comm/gloo_world.h"

namespace partrain::runner {
namespace {

// Two units of 5 and 3 elements over dp 2: shards of 3 and 2, the padding never seen.
ParamLayout two_units() {
  ParamLayout layout;
  layout.add_unit("a", 0, {{"a.w", 1, {5}, TpSplit::kReplicated, InitKind::kNormal, false}}, {});
  layout.add_unit("b", 0, {{"b.w", 2, {3}, TpSplit::kReplicated, InitKind::kNormal, false}}, {});
  return layout;
}

void run_ranks(int stage, const std::function<void(int, ShardedState&, CpuDevice&)>& body) {
  const ParamLayout layout = two_units();
  comm::testing::run_world(2, [&](int rank, comm::Comm& dp) {
    auto solo = dp.split(rank, 0);  // a tp group of one
    ASSERT_TRUE(solo.is_ok());
    CpuDevice device;
    TensorParallel tp(**solo, false, device);
    auto state = ShardedState::create(device, layout, stage, dp, tp, 7, 1, TpShard{});
    ASSERT_TRUE(state.is_ok()) << state.status().message();
    body(rank, **state, device);
  });
}

TEST(ShardedState, FsdpGathersTheFullParametersOfAUnit) {
  const ParamLayout layout = two_units();
  std::vector<float> want;
  for (size_t unit = 0; unit < layout.units().size(); ++unit) {
    const std::vector<float> values = layout.unit_initial_values(unit, 7, 1, TpShard{});
    want.insert(want.end(), values.begin(), values.end());
  }
  run_ranks(3, [&](int, ShardedState& state, CpuDevice& device) {
    EXPECT_EQ(device.allocator().stats().current[memory::Category::kParams],
              uint64_t{(3 + 2) * 4});
    for (size_t unit = 0; unit < 2; ++unit) {
      auto view = state.acquire(unit, Pass::kForward);
      ASSERT_TRUE(view.is_ok());
      EXPECT_EQ(view->grads, nullptr);
      const ParamUnit& u = layout.units()[unit];
      for (int64_t i = 0; i < u.numel; ++i) {
        EXPECT_EQ(view->params[i], want[static_cast<size_t>(u.offset + i)]) << unit << " " << i;
      }
      ASSERT_TRUE(state.release(unit, Pass::kForward).is_ok());
    }
    ASSERT_TRUE(state.reduce_gradients(nullptr).is_ok());
  });
}

TEST(ShardedState, BackwardUsesAreSummedOverRanksAndMicroBatches) {
  for (int stage : {2, 3}) {
    run_ranks(stage, [&](int rank, ShardedState& state, CpuDevice&) {
      state.zero_grads();
      for (int micro_batch = 0; micro_batch < 2; ++micro_batch) {
        for (size_t unit : {size_t{1}, size_t{0}}) {
          auto view = state.acquire(unit, Pass::kBackward);
          ASSERT_TRUE(view.is_ok());
          const int64_t n = unit == 0 ? 5 : 3;
          for (int64_t i = 0; i < n; ++i) view->grads[i] += static_cast<float>(rank + 1);
          ASSERT_TRUE(state.release(unit, Pass::kBackward).is_ok());
        }
      }
      ASSERT_TRUE(state.reduce_gradients(nullptr).is_ok());
      // Every element's gradient is 2 x (1 + 2) = 6; this rank owns 3 + 2 (rank 0) or 2 + 1.
      const double owned = rank == 0 ? 5 : 3;
      StatusOr<double> squares = state.owned_grad_squares(0, NormShare{});
      ASSERT_TRUE(squares.is_ok()) << squares.status().message();
      EXPECT_DOUBLE_EQ(*squares, owned * 36) << "stage " << stage;
      // Replicas holding the same shard (a hybrid) each count a piece of every unit's owned
      // elements: unit 0's 3 (rank 0) or 2 split 1 + 2 or 1 + 1, unit 1's 2 or 1 as 1 + 1 or
      // 0 + 1. The pieces add up to the shard, and neither replica counts all of it.
      StatusOr<double> first = state.owned_grad_squares(0, NormShare{2, 0});
      StatusOr<double> second = state.owned_grad_squares(0, NormShare{2, 1});
      ASSERT_TRUE(first.is_ok() && second.is_ok());
      EXPECT_DOUBLE_EQ(*first, (rank == 0 ? 2 : 1) * 36.0) << "stage " << stage;
      EXPECT_DOUBLE_EQ(*second, (rank == 0 ? 3 : 2) * 36.0) << "stage " << stage;
    });
  }
}

}  // namespace
}  // namespace partrain::runner
