#include "runner/comm/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace partrain::comm {
namespace {

TEST(ReduceKernels, Float32EveryOp) {
  std::vector<float> a = {1.5f, -2.0f, 3.0f};
  std::vector<float> b = {0.5f, 4.0f, -3.0f};
  std::vector<float> out(3);
  reduce_into(out.data(), a.data(), b.data(), 3, DType::kF32, ReduceOp::kSum);
  EXPECT_EQ(out, (std::vector<float>{2.0f, 2.0f, 0.0f}));
  reduce_into(out.data(), a.data(), b.data(), 3, DType::kF32, ReduceOp::kAvg);  // sum until divided
  divide_for_avg(out.data(), 3, DType::kF32, 2);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 1.0f, 0.0f}));
  reduce_into(out.data(), a.data(), b.data(), 3, DType::kF32, ReduceOp::kMax);
  EXPECT_EQ(out, (std::vector<float>{1.5f, 4.0f, 3.0f}));
  reduce_into(out.data(), a.data(), b.data(), 3, DType::kF32, ReduceOp::kMin);
  EXPECT_EQ(out, (std::vector<float>{0.5f, -2.0f, -3.0f}));
}

TEST(ReduceKernels, IntegersAndTruncatingAvg) {
  std::vector<int64_t> a = {7, -7, int64_t{1} << 40};
  std::vector<int64_t> b = {0, 0, 1};
  reduce_into(a.data(), a.data(), b.data(), 3, DType::kI64, ReduceOp::kSum);  // aliasing out == a
  divide_for_avg(a.data(), 3, DType::kI64, 2);
  EXPECT_EQ(a, (std::vector<int64_t>{3, -3, (int64_t{1} << 39)}));  // toward zero
  std::vector<int32_t> x = {5, -9};
  std::vector<int32_t> y = {-1, 2};
  reduce_into(x.data(), x.data(), y.data(), 2, DType::kI32, ReduceOp::kMin);
  EXPECT_EQ(x, (std::vector<int32_t>{-1, -9}));
}

TEST(ReduceKernels, SixteenBitFloatsAddInFloat32AndRoundOnce) {
  // 256 + 1 is not representable in bf16 (8 bits): the exact sum 257 rounds to even, 256.
  std::vector<uint16_t> a = {float_to_bf16(256.0f), float_to_bf16(1.5f)};
  std::vector<uint16_t> b = {float_to_bf16(1.0f), float_to_bf16(2.25f)};
  std::vector<uint16_t> out(2);
  reduce_into(out.data(), a.data(), b.data(), 2, DType::kBF16, ReduceOp::kSum);
  EXPECT_EQ(bf16_to_float(out[0]), 256.0f);
  EXPECT_EQ(bf16_to_float(out[1]), 3.75f);
  std::vector<uint16_t> h = {float_to_fp16(2048.0f), float_to_fp16(-1.0f)};
  std::vector<uint16_t> k = {float_to_fp16(3.0f), float_to_fp16(0.5f)};
  reduce_into(out.data(), h.data(), k.data(), 2, DType::kF16, ReduceOp::kSum);
  EXPECT_EQ(fp16_to_float(out[0]), 2052.0f);  // 2051 ties to even 2052 (spacing 2)
  EXPECT_EQ(fp16_to_float(out[1]), -0.5f);
  reduce_into(out.data(), h.data(), k.data(), 2, DType::kF16, ReduceOp::kMax);
  EXPECT_EQ(fp16_to_float(out[0]), 2048.0f);
  EXPECT_EQ(fp16_to_float(out[1]), 0.5f);
  auto fn = make_reduce_function(DType::kF16, ReduceOp::kMin);
  fn(out.data(), h.data(), k.data(), 2);
  EXPECT_EQ(fp16_to_float(out[0]), 3.0f);
  EXPECT_EQ(fp16_to_float(out[1]), -1.0f);
}

}  // namespace
}  // namespace partrain::comm
