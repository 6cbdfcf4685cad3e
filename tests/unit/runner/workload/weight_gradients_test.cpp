#include "runner/workload/weight_gradients.h"

#include <gtest/gtest.h>

#include <vector>

#include "runner/device/cpu_device.h"

namespace partrain::runner {
namespace {

using memory::Category;

// out = inp @ W^T over N = 3 rows, C = 2 inputs, OC = 4 outputs.
constexpr int64_t N = 3, C = 2, OC = 4;

class WeightGradientsTest : public ::testing::Test {
 protected:
  Tensor filled(std::vector<int64_t> shape, Category category, float start) {
    auto t = Tensor::create(device.allocator(), std::move(shape), category);
    EXPECT_TRUE(t.is_ok());
    for (int64_t i = 0; i < t->numel(); ++i) t->data()[i] = start + 0.25f * static_cast<float>(i);
    return std::move(t).value();
  }

  CpuDevice device;
};

// Deferred, the input gradient and the bias gradient come at once and the weight gradient only
// from run(): the same sums as the undeferred backward, to the bit.
TEST_F(WeightGradientsTest, DeferredWeightGradientEqualsTheImmediateOne) {
  Tensor weight = filled({OC, C}, Category::kParams, 0.5f);
  Tensor dout = filled({N, OC}, Category::kWorkspace, -1.0f);
  std::vector<float> dinp_now(N * C, 0), dw_now(OC * C, 0), db_now(OC, 0);
  std::vector<float> dinp_later(N * C, 0), dw_later(OC * C, 0), db_later(OC, 0);

  WeightGradients now(device, /*defer=*/false);
  Tensor inp_now = filled({N, C}, Category::kActivations, 2.0f);
  ASSERT_TRUE(now.matmul_backward(dinp_now.data(), dw_now.data(), db_now.data(), dout.data(),
                                  std::move(inp_now), weight.data(), N, C, OC)
                  .is_ok());
  EXPECT_TRUE(now.empty());

  WeightGradients later(device, /*defer=*/true);
  Tensor inp = filled({N, C}, Category::kActivations, 2.0f);
  const uint64_t before = device.allocator().current_bytes(Category::kActivations);
  ASSERT_TRUE(later
                  .matmul_backward(dinp_later.data(), dw_later.data(), db_later.data(), dout.data(),
                                   std::move(inp), weight.data(), N, C, OC)
                  .is_ok());
  EXPECT_EQ(dinp_later, dinp_now);
  EXPECT_EQ(db_later, db_now);
  EXPECT_EQ(dw_later, std::vector<float>(OC * C, 0));  // not yet
  EXPECT_FALSE(later.empty());
  // What W reads is kept: the input (moved in) and a copy of the output gradient.
  EXPECT_EQ(device.allocator().current_bytes(Category::kActivations), before + N * OC * 4);
  // The caller may reuse its gradient buffer: W reads its own copy.
  std::fill_n(dout.data(), N * OC, 100.0f);
  later.run();
  EXPECT_TRUE(later.empty());
  EXPECT_EQ(dw_later, dw_now);
  EXPECT_EQ(device.allocator().current_bytes(Category::kActivations), before - N * C * 4);
}

}  // namespace
}  // namespace partrain::runner
