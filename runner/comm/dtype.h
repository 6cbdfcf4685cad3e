// Element types and reductions the communicators move and combine, with the names nccl-tests
// prints ("float", "bfloat16", "sum") and the byte sizes used for traffic accounting.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace partrain::comm {

enum class DType : uint8_t { kF32, kBF16, kF16, kI32, kI64 };
enum class ReduceOp : uint8_t { kSum, kAvg, kMax, kMin };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);      // float, bfloat16, half, int32, int64
std::optional<DType> parse_dtype(std::string_view name);  // also fp32, bf16, fp16, f32, ...
std::string_view reduce_op_name(ReduceOp op);  // sum, avg, max, min
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

// bfloat16 and IEEE half as host-side conversions; reductions on them accumulate in fp32. The
// bf16 pair is inline and branch-free (the NaN case is a select), so loops over them vectorise:
// the CPU device's bf16 storage and GEMM operands go through them for every element.
inline float bf16_to_float(uint16_t value) {
  return std::bit_cast<float>(static_cast<uint32_t>(value) << 16);
}
// Round to nearest even: add 0x7fff plus the lowest kept bit, then truncate. NaN keeps its sign
// and gets a quiet-NaN payload bit, so truncation cannot turn it into Inf.
inline uint16_t float_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}
float fp16_to_float(uint16_t value);
uint16_t float_to_fp16(float value);  // round to nearest even

}  // namespace partrain::comm
