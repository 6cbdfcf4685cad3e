#include "runner/device/tensor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace partrain::runner {
namespace {

using memory::Category;

TEST(Tensor, ShapeNumelAndTrackedBytes) {
  TrackedAllocator allocator;
  {
    auto tensor = Tensor::zeros(allocator, {2, 3, 4}, Category::kActivations);
    ASSERT_TRUE(tensor.is_ok()) << tensor.status().message();
    EXPECT_EQ(tensor->numel(), 24);
    EXPECT_EQ(tensor->dim(2), 4);
    EXPECT_EQ(tensor->bytes(), 96u);
    EXPECT_EQ(tensor->shape_string(), "[2, 3, 4]");
    EXPECT_EQ(tensor->category(), Category::kActivations);
    EXPECT_EQ(allocator.current_bytes(Category::kActivations), 96u);
    for (float value : tensor->values()) EXPECT_EQ(value, 0.0f);
    Tensor moved = std::move(tensor).value();
    EXPECT_EQ(allocator.current_bytes(Category::kActivations), 96u);
  }
  EXPECT_EQ(allocator.current_bytes(Category::kActivations), 0u);
  EXPECT_EQ(allocator.peak_bytes(Category::kActivations), 96u);
}

TEST(Tensor, FillZeroAndCopy) {
  TrackedAllocator allocator;
  auto tensor = Tensor::create(allocator, {3}, Category::kParams);
  ASSERT_TRUE(tensor.is_ok());
  tensor->fill(2.5f);
  EXPECT_THAT(tensor->values(), ::testing::Each(2.5f));
  tensor->zero();
  EXPECT_THAT(tensor->values(), ::testing::Each(0.0f));
  const std::vector<float> source = {1.0f, 2.0f, 3.0f};
  EXPECT_TRUE(tensor->copy_from(source).is_ok());
  EXPECT_THAT(tensor->values(), ::testing::ElementsAre(1.0f, 2.0f, 3.0f));
  Status wrong = tensor->copy_from(std::vector<float>{1.0f});
  EXPECT_FALSE(wrong.is_ok());
  EXPECT_THAT(wrong.message(), ::testing::HasSubstr("shape [3]"));
}

TEST(Tensor, FailuresCarryTheAllocatorsMessage) {
  TrackedAllocator allocator;
  allocator.set_limit_bytes(1024);
  auto tensor = Tensor::create(allocator, {1024, 1024}, Category::kGrads);
  ASSERT_FALSE(tensor.is_ok());
  EXPECT_THAT(tensor.status().message(),
              ::testing::StartsWith("out of memory allocating 4.00 MiB of grads"));
  auto negative = Tensor::create(allocator, {2, -1}, Category::kGrads);
  ASSERT_FALSE(negative.is_ok());
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
}

TEST(Tensor, EmptyShapesAllocateNothing) {
  TrackedAllocator allocator;
  auto tensor = Tensor::zeros(allocator, {0, 5}, Category::kOther);
  ASSERT_TRUE(tensor.is_ok());
  EXPECT_EQ(tensor->numel(), 0);
  EXPECT_EQ(allocator.stats().total_peak, 0u);
}

}  // namespace
}  // namespace partrain::runner
