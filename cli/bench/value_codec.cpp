// Host-side conversion of benchmark values to and from each dtype, and the result check.
#include <cmath>
#include <cstring>

#include "cli/bench/bench_runner.h"

namespace partrain::bench {
namespace {

template <typename T>
void store(std::byte* out, T value) {
  std::memcpy(out, &value, sizeof(T));
}
template <typename T>
T load(const std::byte* in) {
  T value;
  std::memcpy(&value, in, sizeof(T));
  return value;
}

}  // namespace

std::vector<std::byte> encode_values(const std::vector<double>& values, comm::DType dtype) {
  size_t width = comm::dtype_size(dtype);
  std::vector<std::byte> bytes(values.size() * width);
  for (size_t i = 0; i < values.size(); ++i) {
    std::byte* out = bytes.data() + i * width;
    auto value = static_cast<float>(values[i]);
    switch (dtype) {
      case comm::DType::kF32: store(out, value); break;
      case comm::DType::kBF16: store(out, comm::float_to_bf16(value)); break;
      case comm::DType::kF16: store(out, comm::float_to_fp16(value)); break;
      case comm::DType::kI32: store(out, static_cast<int32_t>(std::lround(values[i]))); break;
      case comm::DType::kI64: store(out, static_cast<int64_t>(std::llround(values[i]))); break;
    }
  }
  return bytes;
}

std::vector<double> decode_values(const std::vector<std::byte>& bytes, comm::DType dtype) {
  size_t width = comm::dtype_size(dtype);
  std::vector<double> values(bytes.size() / width);
  for (size_t i = 0; i < values.size(); ++i) {
    const std::byte* in = bytes.data() + i * width;
    switch (dtype) {
      case comm::DType::kF32: values[i] = load<float>(in); break;
      case comm::DType::kBF16: values[i] = comm::bf16_to_float(load<uint16_t>(in)); break;
      case comm::DType::kF16: values[i] = comm::fp16_to_float(load<uint16_t>(in)); break;
      case comm::DType::kI32: values[i] = load<int32_t>(in); break;
      case comm::DType::kI64: values[i] = static_cast<double>(load<int64_t>(in)); break;
    }
  }
  return values;
}

int64_t count_wrong(const std::vector<double>& got, const std::vector<double>& expected,
                    comm::DType dtype) {
  if (got.size() != expected.size()) return static_cast<int64_t>(expected.size());
  double tolerance = 0;
  switch (dtype) {
    case comm::DType::kF32: tolerance = 1e-5; break;
    case comm::DType::kBF16: tolerance = 1e-2; break;
    case comm::DType::kF16: tolerance = 1e-3; break;
    case comm::DType::kI32:
    case comm::DType::kI64: tolerance = 0; break;
  }
  bool integral = tolerance == 0;
  int64_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    // Integer averages truncate toward zero, as NCCL's ncclAvg does for integer types.
    double want = integral ? std::trunc(expected[i]) : expected[i];
    if (std::abs(got[i] - want) > tolerance * std::max(1.0, std::abs(want))) ++wrong;
  }
  return wrong;
}

}  // namespace partrain::bench
