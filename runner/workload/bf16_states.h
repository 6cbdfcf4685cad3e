// What model states stored in either element type need beside the device's element-wise ops:
// AdamW reading bf16 gradients, sums of squares (the norms), and the type a communicator moves.
// bf16 values are widened to fp32 a chunk at a time into workspace, so the transient is bounded
// (kBf16Chunk values) however large the shard.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "runner/comm/dtype.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"
#include "runner/ops/adamw.h"

namespace partrain::runner {

inline constexpr int64_t kBf16Chunk = int64_t{1} << 22;  // 16 MiB of fp32 a chunk

// AdamW (runner/ops/adamw.h) on n fp32 values (the parameters, or the master of bf16 ones), m
// and v, from gradients [offset, offset + n) of `grads` (fp32, or bf16 widened a chunk at a time:
// element-wise, so chunking changes nothing); then, where bf16_params is not null, the values
// written back rounded into it.
Status adamw_update(Device& device, float* values, Tensor& grads, int64_t offset, float* m,
                    float* v, int64_t n, const ops::AdamWConfig& config, int64_t step,
                    uint16_t* bf16_params);

// sum_i x_i^2 over elements [begin, begin + n) of `values` (fp32 or bf16), in double.
StatusOr<double> sum_of_squares(Device& device, Tensor& values, int64_t begin, int64_t n);

// What a communicator moves for a tensor of this element type.
comm::DType wire_dtype(const Tensor& tensor);

}  // namespace partrain::runner
