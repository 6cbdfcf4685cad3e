#include "runner/ops/bf16_round.h"

#include "runner/comm/dtype.h"

namespace partrain::runner::ops {

void round_to_bf16(float* out, const float* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = comm::bf16_to_float(comm::float_to_bf16(inp[i]));
}

}  // namespace partrain::runner::ops
