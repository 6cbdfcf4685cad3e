#include "runner/ops/bf16_round.h"

#include "runner/comm/dtype.h"

namespace partrain::runner::ops {

void round_to_bf16(float* out, const float* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = comm::bf16_to_float(comm::float_to_bf16(inp[i]));
}

void to_bf16(uint16_t* out, const float* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = comm::float_to_bf16(inp[i]);
}

void from_bf16(float* out, const uint16_t* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = comm::bf16_to_float(inp[i]);
}

void store_bf16(uint16_t* out, float* values, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = comm::float_to_bf16(values[i]);
    values[i] = comm::bf16_to_float(out[i]);
  }
}

void accumulate_bf16(uint16_t* sum, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) sum[i] = comm::float_to_bf16(comm::bf16_to_float(sum[i]) + x[i]);
}

}  // namespace partrain::runner::ops
