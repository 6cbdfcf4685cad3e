// Element types and reductions the communicators move and combine, with the names nccl-tests
// prints ("float", "bfloat16", "sum") and the byte sizes used for traffic accounting.
#pragma once

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

// bfloat16 and IEEE half as host-side conversions; reductions on them accumulate in fp32.
float bf16_to_float(uint16_t value);
uint16_t float_to_bf16(float value);  // round to nearest even
float fp16_to_float(uint16_t value);
uint16_t float_to_fp16(float value);  // round to nearest even

}  // namespace partrain::comm
