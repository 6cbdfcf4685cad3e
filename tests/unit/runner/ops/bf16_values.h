// Test support: bf16 versions of fp32 test data, through the ops' own conversions
// (runner/ops/bf16_round.h), for the tests of everything that stores or multiplies bf16.
#pragma once

#include <cstdint>
#include <vector>

#include "runner/ops/bf16_round.h"

namespace partrain::runner::ops::testing {

// The bf16 bits of `values`, rounded to nearest even.
inline std::vector<uint16_t> bf16_bits(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  to_bf16(bits.data(), values.data(), static_cast<int64_t>(values.size()));
  return bits;
}

// bf16 bits as the fp32 values they hold (exact).
inline std::vector<float> widened(const std::vector<uint16_t>& bits) {
  std::vector<float> values(bits.size());
  from_bf16(values.data(), bits.data(), static_cast<int64_t>(bits.size()));
  return values;
}

// `values` rounded to bf16, kept as fp32.
inline std::vector<float> rounded(const std::vector<float>& values) {
  std::vector<float> out(values.size());
  round_to_bf16(out.data(), values.data(), static_cast<int64_t>(values.size()));
  return out;
}

}  // namespace partrain::runner::ops::testing
