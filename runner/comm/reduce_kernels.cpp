#include "runner/comm/reduce_kernels.h"

#include <algorithm>
#include <cstdint>

namespace partrain::comm {
namespace {

// How a stored element becomes the value the reduction works on, and back.
template <typename T>
struct Plain {
  using Value = T;
  static Value load(T x) { return x; }
  static T store(Value x) { return x; }
};
struct BFloat16 {
  using Value = float;
  static Value load(uint16_t x) { return bf16_to_float(x); }
  static uint16_t store(Value x) { return float_to_bf16(x); }
};
struct Half {
  using Value = float;
  static Value load(uint16_t x) { return fp16_to_float(x); }
  static uint16_t store(Value x) { return float_to_fp16(x); }
};

template <typename Stored, typename Codec>
void reduce_typed(void* out, const void* a, const void* b, size_t count, ReduceOp op) {
  auto* o = static_cast<Stored*>(out);
  const auto* x = static_cast<const Stored*>(a);
  const auto* y = static_cast<const Stored*>(b);
  using V = typename Codec::Value;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (size_t i = 0; i < count; ++i) {
        o[i] = Codec::store(static_cast<V>(Codec::load(x[i]) + Codec::load(y[i])));
      }
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < count; ++i) {
        o[i] = Codec::store(std::max(Codec::load(x[i]), Codec::load(y[i])));
      }
      return;
    case ReduceOp::kMin:
      for (size_t i = 0; i < count; ++i) {
        o[i] = Codec::store(std::min(Codec::load(x[i]), Codec::load(y[i])));
      }
      return;
  }
}

template <typename Stored, typename Codec>
void divide_typed(void* buffer, size_t count, int divisor) {
  auto* data = static_cast<Stored*>(buffer);
  using V = typename Codec::Value;
  const V d = static_cast<V>(divisor);
  for (size_t i = 0; i < count; ++i) {
    data[i] = Codec::store(static_cast<V>(Codec::load(data[i]) / d));
  }
}

}  // namespace

void reduce_into(void* out, const void* a, const void* b, size_t count, DType dtype,
                 ReduceOp op) {
  switch (dtype) {
    case DType::kF32: return reduce_typed<float, Plain<float>>(out, a, b, count, op);
    case DType::kBF16: return reduce_typed<uint16_t, BFloat16>(out, a, b, count, op);
    case DType::kF16: return reduce_typed<uint16_t, Half>(out, a, b, count, op);
    case DType::kI32: return reduce_typed<int32_t, Plain<int32_t>>(out, a, b, count, op);
    case DType::kI64: return reduce_typed<int64_t, Plain<int64_t>>(out, a, b, count, op);
  }
}

void divide_for_avg(void* buffer, size_t count, DType dtype, int divisor) {
  if (divisor == 1) return;
  switch (dtype) {
    case DType::kF32: return divide_typed<float, Plain<float>>(buffer, count, divisor);
    case DType::kBF16: return divide_typed<uint16_t, BFloat16>(buffer, count, divisor);
    case DType::kF16: return divide_typed<uint16_t, Half>(buffer, count, divisor);
    case DType::kI32: return divide_typed<int32_t, Plain<int32_t>>(buffer, count, divisor);
    case DType::kI64: return divide_typed<int64_t, Plain<int64_t>>(buffer, count, divisor);
  }
}

ReduceFunction make_reduce_function(DType dtype, ReduceOp op) {
  return [dtype, op](void* out, const void* a, const void* b, size_t count) {
    reduce_into(out, a, b, count, dtype, op);
  };
}

}  // namespace partrain::comm
