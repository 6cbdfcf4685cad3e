#include "runner/comm/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

namespace partrain::comm {
namespace {

TEST(DType, NamesAsNcclTestsPrintsThem) {
  EXPECT_EQ(dtype_name(DType::kF32), "float");
  EXPECT_EQ(dtype_name(DType::kBF16), "bfloat16");
  EXPECT_EQ(dtype_name(DType::kF16), "half");
  EXPECT_EQ(dtype_name(DType::kI32), "int32");
  EXPECT_EQ(dtype_name(DType::kI64), "int64");
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  EXPECT_EQ(dtype_size(DType::kI32), 4u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_EQ(reduce_op_name(ReduceOp::kAvg), "avg");
}

TEST(DType, ParsesNamesAndShortSpellings) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  }
  EXPECT_EQ(parse_dtype("fp32"), DType::kF32);
  EXPECT_EQ(parse_dtype("f32"), DType::kF32);
  EXPECT_EQ(parse_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("fp16"), DType::kF16);
  EXPECT_EQ(parse_dtype("f16"), DType::kF16);
  EXPECT_EQ(parse_dtype("int"), DType::kI32);
  EXPECT_EQ(parse_dtype("i32"), DType::kI32);
  EXPECT_EQ(parse_dtype("i64"), DType::kI64);
  EXPECT_EQ(parse_dtype("double"), std::nullopt);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    EXPECT_EQ(parse_reduce_op(reduce_op_name(op)), op);
  }
  EXPECT_EQ(parse_reduce_op("prod"), std::nullopt);
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even mantissa (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: goes up to even.
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above half: up
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // The largest float rounds to infinity, as round-to-nearest must.
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
}

TEST(BFloat16, EveryValueRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = bf16_to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), h) << bits;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(1.0f + 0x1p-11f), 0x3c00);      // tie, even stays
  EXPECT_EQ(float_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie, odd goes up
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // tie with 2^16: ties to even is Inf
  EXPECT_EQ(float_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_fp16(0x1p-24f), 0x0001);       // smallest subnormal
  EXPECT_EQ(float_to_fp16(0x1p-25f), 0x0000);       // half of it: tie to even zero
  EXPECT_EQ(float_to_fp16(0x1.8p-24f), 0x0002);     // 1.5 ulp: tie to even 2
  EXPECT_EQ(float_to_fp16(0x1p-14f), 0x0400);       // smallest normal
  EXPECT_EQ(float_to_fp16(0x1.ffcp-15f), 0x0400);   // rounds up out of the subnormals
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_FLOAT_EQ(fp16_to_float(0x3555), 0.333251953125f);
}

TEST(Half, EveryValueRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = fp16_to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_fp16(f), h) << bits;
  }
}

}  // namespace
}  // namespace partrain::comm
