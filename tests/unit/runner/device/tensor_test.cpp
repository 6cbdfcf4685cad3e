#include "runner/device/tensor.h"

#include "runner/device/cpu_device.h"
#include "runner/device/isolated_cpu_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace partrain::runner {
namespace {

using memory::Category;

TEST(Tensor, ShapeNumelAndTrackedBytes) {
  CpuDevice device;
  TrackedAllocator& allocator = device.allocator();
  {
    auto tensor = Tensor::zeros(device, {2, 3, 4}, Category::kActivations);
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

// Memory that host code cannot read is zeroed by its device: the values come back as zeros.
TEST(Tensor, ZerosAreWrittenByTheDevice) {
  auto device = IsolatedCpuDevice::create();
  ASSERT_TRUE(device.is_ok()) << device.status().message();
  auto tensor = Tensor::zeros(**device, {5, 7}, Category::kGrads);
  ASSERT_TRUE(tensor.is_ok()) << tensor.status().message();
  std::vector<float> values(35, 1.0f);
  (*device)->download(values.data(), tensor->data(), tensor->bytes());
  ASSERT_TRUE((*device)->status().is_ok()) << (*device)->status().message();
  EXPECT_THAT(values, ::testing::Each(0.0f));
  EXPECT_EQ((*device)->allocator().current_bytes(Category::kGrads), 140u);
}

TEST(Tensor, FillAndCopy) {
  TrackedAllocator allocator;
  auto tensor = Tensor::create(allocator, {3}, Category::kParams);
  ASSERT_TRUE(tensor.is_ok());
  tensor->fill(2.5f);
  EXPECT_THAT(tensor->values(), ::testing::Each(2.5f));
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
  CpuDevice device;
  auto tensor = Tensor::zeros(device, {0, 5}, Category::kOther);
  ASSERT_TRUE(tensor.is_ok());
  EXPECT_EQ(tensor->numel(), 0);
  EXPECT_EQ(device.allocator().stats().total_peak, 0u);
}

}  // namespace
}  // namespace partrain::runner
