// What model states stored in either element type need beside the device's element-wise ops:
// AdamW from fp32 or bf16 gradients, sums of squares (the norms) of either, and the type a
// communicator moves. The device reads bf16 values widened as it goes, so no fp32 copy of them is
// made.
#pragma once

#include <cstdint>
#include <utility>

#include "runner/comm/dtype.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"
#include "runner/ops/adamw.h"

namespace partrain::runner {

// AdamW (runner/ops/adamw.h) on n fp32 values (the parameters, or the master of bf16 ones), m
// and v, from gradients [offset, offset + n) of `grads` (fp32 or bf16); where bf16_params is not
// null, the updated values are also written rounded into it, in the same pass.
void adamw_update(Device& device, float* values, Tensor& grads, int64_t offset, float* m,
                  float* v, int64_t n, const ops::AdamWConfig& config, int64_t step,
                  uint16_t* bf16_params);

// sum_i x_i^2 over elements [begin, begin + n) of `values` (fp32 or bf16), in double.
double sum_of_squares(Device& device, const Tensor& values, int64_t begin, int64_t n);

// Ranks that hold the same values (DDP's replicas, a hybrid's shard replicas) each count an equal
// piece of them in a norm, so that none sums what the others wait for. `holders` ranks, this one
// the `index`-th.
struct NormShare {
  int64_t holders = 1;
  int64_t index = 0;

  // This rank's piece of [begin, end), as (begin, end).
  std::pair<int64_t, int64_t> piece(int64_t begin, int64_t end) const {
    const int64_t n = end - begin;
    return {begin + n * index / holders, begin + n * (index + 1) / holders};
  }
};

// What a communicator moves for a tensor of this element type.
comm::DType wire_dtype(const Tensor& tensor);

}  // namespace partrain::runner
