#include "runner/workload/activation_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runner/device/cpu_device.h"
#include "tests/unit/runner/ops/bf16_values.h"

namespace partrain::runner {
namespace {

using memory::Category;
using ops::testing::rounded;
using ::testing::HasSubstr;

// Values that bf16 cannot hold (a 24-bit mantissa each), so rounding shows.
std::vector<float> unrounded(size_t n) {
  std::vector<float> values(n);
  for (size_t i = 0; i < n; ++i) values[i] = 1.0f + static_cast<float>(i + 1) * 0x1p-20f;
  return values;
}

class ActivationStoreTest : public ::testing::Test {
 protected:
  uint64_t bytes(Category category) { return device.allocator().current_bytes(category); }

  CpuDevice device;
};

// fp32: an op writes and reads the activation's own elements; nothing else is allocated.
TEST_F(ActivationStoreTest, Fp32IsTheActivationItself) {
  ActivationStore store(device, ElementType::kF32);
  auto saved = store.create({2, 3});
  ASSERT_TRUE(saved.is_ok());
  EXPECT_EQ(saved->type(), ElementType::kF32);
  EXPECT_EQ(bytes(Category::kActivations), 24u);
  auto out = store.output(*saved);
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(out->data(), saved->data());
  const std::vector<float> values = unrounded(6);
  std::copy(values.begin(), values.end(), out->data());
  store.store(*out, *saved);
  auto in = store.input(*saved);
  ASSERT_TRUE(in.is_ok());
  EXPECT_EQ(in->data(), saved->data());
  EXPECT_EQ(std::vector<float>(in->data(), in->data() + 6), values);  // nothing rounded
  EXPECT_EQ(bytes(Category::kWorkspace), 0u);
}

// keep(): the same rounding into the activation as store(), with the fp32 values neither written
// back nor kept: the workspace is gone as keep() returns.
TEST_F(ActivationStoreTest, KeepRoundsIntoTheActivationAndLetsTheWorkspaceGo) {
  ActivationStore store(device, ElementType::kBf16);
  auto saved = store.create({2, 3});
  ASSERT_TRUE(saved.is_ok());
  const std::vector<float> values = unrounded(6);
  auto out = store.output(*saved);
  ASSERT_TRUE(out.is_ok());
  std::copy(values.begin(), values.end(), out->data());
  EXPECT_EQ(bytes(Category::kWorkspace), 24u);
  store.keep(std::move(*out), *saved);
  EXPECT_EQ(bytes(Category::kWorkspace), 0u);
  std::vector<float> kept(6);
  store.copy_out(kept.data(), *saved);
  EXPECT_EQ(kept, rounded(values));
  // fp32: the op wrote the activation itself; nothing to do.
  ActivationStore fp32_store(device, ElementType::kF32);
  auto fp32_saved = fp32_store.create({6});
  ASSERT_TRUE(fp32_saved.is_ok());
  auto fp32_out = fp32_store.output(*fp32_saved);
  ASSERT_TRUE(fp32_out.is_ok());
  std::copy(values.begin(), values.end(), fp32_out->data());
  fp32_store.keep(std::move(*fp32_out), *fp32_saved);
  EXPECT_EQ(std::vector<float>(fp32_saved->data(), fp32_saved->data() + 6), values);
}

// bf16: 2 bytes an element kept; an op writes into fp32 workspace, store() rounds into the
// activation and leaves the rounded values for the next op; input() widens them exactly.
TEST_F(ActivationStoreTest, Bf16KeepsTheRoundedValuesAndWidensThemBack) {
  ActivationStore store(device, ElementType::kBf16);
  auto saved = store.create({2, 3});
  ASSERT_TRUE(saved.is_ok());
  EXPECT_EQ(saved->type(), ElementType::kBf16);
  EXPECT_EQ(bytes(Category::kActivations), 12u);
  const std::vector<float> values = unrounded(6);
  const std::vector<float> want = rounded(values);
  ASSERT_NE(want, values);
  {
    auto out = store.output(*saved);
    ASSERT_TRUE(out.is_ok());
    EXPECT_EQ(bytes(Category::kWorkspace), 24u);  // the fp32 buffer the op writes
    std::copy(values.begin(), values.end(), out->data());
    store.store(*out, *saved);
    EXPECT_EQ(std::vector<float>(out->data(), out->data() + 6), want);
  }
  EXPECT_EQ(bytes(Category::kWorkspace), 0u);  // freed with the Output
  {
    auto in = store.input(*saved);
    ASSERT_TRUE(in.is_ok());
    EXPECT_NE(static_cast<const void*>(in->data()), static_cast<const void*>(saved->bf16_data()));
    EXPECT_EQ(std::vector<float>(in->data(), in->data() + 6), want);
    EXPECT_EQ(bytes(Category::kWorkspace), 24u);
  }
  EXPECT_EQ(bytes(Category::kWorkspace), 0u);
  std::vector<float> widened(6);
  store.copy_out(widened.data(), *saved);
  EXPECT_EQ(widened, want);
  store.assign(*saved, values.data());  // rounds on the way in
  store.copy_out(widened.data(), *saved);
  EXPECT_EQ(widened, want);
}

// A pipeline boundary: copied bit for bit between tensors of one type and size; anything else
// is refused, naming both.
TEST_F(ActivationStoreTest, CopyNeedsTheSameTypeAndSize) {
  ActivationStore bf16(device, ElementType::kBf16);
  auto from = bf16.create({4});
  auto to = bf16.create({4});
  ASSERT_TRUE(from.is_ok() && to.is_ok());
  const std::vector<float> values = unrounded(4);
  bf16.assign(*from, values.data());
  ASSERT_TRUE(bf16.copy(*to, *from).is_ok());
  EXPECT_EQ(std::vector<uint16_t>(to->bf16_data(), to->bf16_data() + 4),
            std::vector<uint16_t>(from->bf16_data(), from->bf16_data() + 4));

  ActivationStore fp32(device, ElementType::kF32);
  auto wide = fp32.create({4});
  auto longer = bf16.create({5});
  ASSERT_TRUE(wide.is_ok() && longer.is_ok());
  Status mixed = bf16.copy(*wide, *from);
  ASSERT_FALSE(mixed.is_ok());
  EXPECT_THAT(mixed.message(), HasSubstr("4 bf16 element(s) into 4 fp32"));
  Status sized = bf16.copy(*longer, *from);
  ASSERT_FALSE(sized.is_ok());
  EXPECT_THAT(sized.message(), HasSubstr("4 bf16 element(s) into 5 bf16"));
}

}  // namespace
}  // namespace partrain::runner
