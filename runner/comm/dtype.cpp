#include "runner/comm/dtype.h"

#include <array>
#include <bit>
#include <utility>

namespace partrain::comm {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float";
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "half";
    case DType::kI32: return "int32";
    case DType::kI64: return "int64";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view name) {
  // nccl-tests' names first, then the short spellings people type on command lines.
  static constexpr std::array<std::pair<std::string_view, DType>, 16> kNames = {{
      {"float", DType::kF32},    {"fp32", DType::kF32},     {"f32", DType::kF32},
      {"float32", DType::kF32},  {"bfloat16", DType::kBF16}, {"bf16", DType::kBF16},
      {"half", DType::kF16},     {"fp16", DType::kF16},     {"f16", DType::kF16},
      {"float16", DType::kF16},  {"int32", DType::kI32},    {"int", DType::kI32},
      {"i32", DType::kI32},      {"int64", DType::kI64},    {"i64", DType::kI64},
      {"long", DType::kI64},
  }};
  for (const auto& [text, dtype] : kNames) {
    if (text == name) return dtype;
  }
  return std::nullopt;
}

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "unknown";
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  if (name == "sum") return ReduceOp::kSum;
  if (name == "avg" || name == "mean") return ReduceOp::kAvg;
  if (name == "max") return ReduceOp::kMax;
  if (name == "min") return ReduceOp::kMin;
  return std::nullopt;
}

float fp16_to_float(uint16_t value) {
  const uint32_t sign = static_cast<uint32_t>(value & 0x8000u) << 16;
  const uint32_t exponent = (value >> 10) & 0x1fu;
  const uint32_t mantissa = value & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

namespace {

// Shifts right by `shift` bits, rounding to nearest with ties to even.
uint32_t shift_round_even(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  return kept + ((rest > half || (rest == half && (kept & 1u) != 0)) ? 1u : 0u);
}

}  // namespace

uint16_t float_to_fp16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // Inf stays Inf; NaN stays a quiet NaN
    const uint32_t nan_bits = magnitude > 0x7f800000u ? 0x200u | ((magnitude >> 13) & 0x3ffu) : 0u;
    return static_cast<uint16_t>(sign | 0x7c00u | nan_bits);
  }
  // 65520 is halfway between 65504 (largest half, odd mantissa) and 2^16: ties go to Inf.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  const uint32_t exponent = magnitude >> 23;
  if (exponent >= 113) {  // normal half: rebias the exponent, round away 13 mantissa bits
    const uint32_t rebased = ((exponent - 112u) << 23) | (magnitude & 0x7fffffu);
    return static_cast<uint16_t>(sign | shift_round_even(rebased, 13));
  }
  if (exponent < 102) return static_cast<uint16_t>(sign);  // below half of the smallest subnormal
  // Subnormal half: value * 2^24 rounded; a carry into 0x400 is the smallest normal, as it must be.
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | shift_round_even(significand, 126u - exponent));
}

}  // namespace partrain::comm
