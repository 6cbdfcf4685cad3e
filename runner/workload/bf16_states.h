// What bf16 gradients need beside the device's element-wise ops: AdamW reading them, and their
// sum of squares (the gradient norm). Both widen the gradients to fp32 a chunk at a time into
// workspace, so the transient is bounded (kBf16Chunk values) however large the shard.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "runner/device/device.h"
#include "runner/ops/adamw.h"

namespace partrain::runner {

inline constexpr int64_t kBf16Chunk = int64_t{1} << 22;  // 16 MiB of fp32 a chunk

// AdamW (runner/ops/adamw.h) on the fp32 master (n), m and v from bf16 gradients, then the master
// written back rounded into the bf16 parameters (n). Element-wise, so chunking changes nothing.
Status adamw_from_bf16_grads(Device& device, float* master, uint16_t* params,
                             const uint16_t* grads, float* m, float* v, int64_t n,
                             const ops::AdamWConfig& config, int64_t step);

// sum_i x_i^2 of n bf16 values, in double.
StatusOr<double> bf16_sum_of_squares(Device& device, const uint16_t* x, int64_t n);

}  // namespace partrain::runner
