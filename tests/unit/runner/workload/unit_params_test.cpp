#include "runner/workload/unit_params.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "runner/device/cpu_device.h"
#include "tests/unit/runner/ops/bf16_values.h"

namespace partrain::runner {
namespace {

using memory::Category;
using ops::testing::bf16_bits;
using ops::testing::widened;
using ::testing::HasSubstr;

// A unit of three parameters as a layer lays them out: a (3, 4) matrix, a bias of 3 and a
// (2, 4) table, at flat offset 100 (the unit's first element).
ParamUnit test_unit() {
  ParamUnit unit;
  unit.name = "layer0";
  unit.offset = 100;
  for (const auto& [name, shape] : {std::pair<const char*, std::vector<int64_t>>{"w", {3, 4}},
                                    {"b", {3}},
                                    {"table", {2, 4}}}) {
    LocalParam param;
    param.spec.name = name;
    param.spec.shape = shape;
    param.local_shape = shape;
    param.offset = unit.offset + unit.numel;
    param.numel = 1;
    for (int64_t d : shape) param.numel *= d;
    unit.numel += param.numel;
    unit.params.push_back(param);
  }
  return unit;
}

class UnitParamsTest : public ::testing::Test {
 protected:
  uint64_t workspace() { return device.allocator().current_bytes(Category::kWorkspace); }

  CpuDevice device;
  ParamUnit unit = test_unit();
  std::vector<float> values = [] {
    std::vector<float> v(23);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f + static_cast<float>(i) * 0.25f;
    return v;
  }();
};

// fp32 storage: everything is the unit's own memory, nothing is copied.
TEST_F(UnitParamsTest, Fp32IsTheUnitItself) {
  std::vector<float> params = values, grads(23, 0.0f);
  auto bound = UnitParams::bind(device, UnitView{params.data(), nullptr, grads.data(), nullptr},
                                unit);
  ASSERT_TRUE(bound.is_ok()) << bound.status().message();
  EXPECT_EQ(bound->matrix(0).f32, params.data());
  EXPECT_EQ(bound->matrix(0).bf16, nullptr);
  EXPECT_EQ(bound->vector(12), params.data() + 12);
  EXPECT_EQ(bound->grad(12), grads.data() + 12);
  EXPECT_EQ(bound->matrix_grad(15).f32, grads.data() + 15);
  auto table = bound->fp32_grad(15);
  ASSERT_TRUE(table.is_ok());
  EXPECT_EQ(*table, grads.data() + 15);
  EXPECT_EQ(workspace(), 0u);
}

// bf16 parameters: matrices as stored, the one vector widened into workspace (3 floats).
TEST_F(UnitParamsTest, Bf16MatricesAsStoredVectorsWidened) {
  const std::vector<uint16_t> params = bf16_bits(values);
  const std::vector<float> param_values = widened(params);
  std::vector<float> grads(23, 0.0f);
  auto bound = UnitParams::bind(device, UnitView{nullptr, params.data(), grads.data(), nullptr},
                                unit);
  ASSERT_TRUE(bound.is_ok()) << bound.status().message();
  EXPECT_EQ(bound->matrix(0).bf16, params.data());
  EXPECT_EQ(bound->matrix(15).bf16, params.data() + 15);
  ASSERT_NE(bound->vector(12), nullptr);
  EXPECT_EQ(std::vector<float>(bound->vector(12), bound->vector(12) + 3),
            std::vector<float>(param_values.begin() + 12, param_values.begin() + 15));
  EXPECT_EQ(bound->vector(0), nullptr);  // a matrix is never widened
  EXPECT_EQ(workspace(), 3 * sizeof(float));
  EXPECT_EQ(bound->grad(12), grads.data() + 12);  // fp32 gradients: the unit's own
}

// bf16 gradients: matrices take the bf16 gradients themselves; the vector's and a scattered
// table's are staged in fp32 (zeroed) and reach the bf16 gradients only through flush(), each
// element added once and rounded once.
TEST_F(UnitParamsTest, Bf16GradientsAreStagedUntilFlushed) {
  const std::vector<uint16_t> params = bf16_bits(values);
  std::vector<uint16_t> grads = bf16_bits(std::vector<float>(23, 1.0f));
  auto bound = UnitParams::bind(device, UnitView{nullptr, params.data(), nullptr, grads.data()},
                                unit);
  ASSERT_TRUE(bound.is_ok()) << bound.status().message();
  EXPECT_EQ(bound->matrix_grad(0).bf16, grads.data());
  EXPECT_EQ(bound->matrix_grad(0).f32, nullptr);
  float* bias = bound->grad(12);
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ(std::vector<float>(bias, bias + 3), std::vector<float>(3, 0.0f));
  auto table = bound->fp32_grad(15);
  ASSERT_TRUE(table.is_ok()) << table.status().message();
  EXPECT_EQ(bound->grad(15), *table);  // staged once, found again
  // 1 + 2^-8 rounds to 1 in bf16 (a tie to even), 1 + 2^-7 is exact: one rounding of the sum.
  bias[0] = 0x1p-8f;
  bias[1] = 0x1p-7f;
  (*table)[7] = 2.0f;
  EXPECT_EQ(workspace(), (3 + 3 + 8) * sizeof(float));  // the widened bias, two stagings
  EXPECT_EQ(widened(grads), std::vector<float>(23, 1.0f));  // nothing added before the flush
  bound->flush();
  std::vector<float> want(23, 1.0f);
  want[13] = 1.0f + 0x1p-7f;
  want[22] = 3.0f;
  EXPECT_EQ(widened(grads), want);
  EXPECT_EQ(workspace(), 3 * sizeof(float));  // the staging is dropped
  bound->flush();                             // and not added twice
  EXPECT_EQ(widened(grads), want);
  auto nowhere = bound->fp32_grad(13);
  ASSERT_FALSE(nowhere.is_ok());
  EXPECT_THAT(nowhere.status().message(), HasSubstr("no parameter of unit layer0 starts at"));
}

}  // namespace
}  // namespace partrain::runner
