// An acquired unit's parameters as the ops read them. Matrices (GEMM weights, embedding tables) as
// stored: fp32, or bf16 under bf16 model states, which the matmul and embedding ops read directly
// (no widened copy, no rounding pass: docs/ops.md "bf16 model states"). Vectors (layernorm
// weights, biases: the 1-D parameters) in fp32, widened under bf16 into one workspace buffer for
// as long as the UnitParams lives, a few kilobytes a layer instead of the unit's fp32 copy.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/status.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"
#include "runner/workload/param_access.h"
#include "runner/workload/param_layout.h"

namespace partrain::runner {

// A matrix parameter in the type it is stored in: exactly one pointer is set (none for an
// absent one, such as wpe on a tensor-parallel rank that does not add it).
struct Weight {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
};

// The matrix starting at unit-local `offset` of an acquired view, as stored.
Weight matrix_at(const UnitView& view, int64_t offset);

class UnitParams {
 public:
  UnitParams() = default;
  // `view` is an acquired view of `unit`; under bf16 storage its vectors are widened here.
  static StatusOr<UnitParams> bind(Device& device, const UnitView& view, const ParamUnit& unit);

  // Offsets are unit-local (0 = the unit's first parameter), as in UnitView.
  Weight matrix(int64_t offset) const { return matrix_at(view_, offset); }
  // A 1-D parameter's fp32 values; nullptr where no 1-D parameter starts at `offset` under bf16.
  const float* vector(int64_t offset) const;
  float* grad(int64_t offset) const { return view_.grads ? view_.grads + offset : nullptr; }

 private:
  UnitView view_;
  Tensor widened_;  // bf16 storage: the vectors, one after another, in fp32
  std::vector<std::pair<int64_t, int64_t>> widened_at_;  // (unit offset, offset in widened_)
};

// The matmul and embedding ops (Device) on a Weight, in whichever type it is stored.
void matmul_forward(Device& device, float* out, const float* inp, Weight weight,
                    const float* bias, int64_t N, int64_t C, int64_t OC);
void matmul_backward(Device& device, float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, Weight weight, int64_t N, int64_t C, int64_t OC);
void embedding_forward_vocab_range(Device& device, float* out, const int32_t* tokens,
                                   Weight wte_shard, Weight wpe, int64_t B, int64_t T, int64_t C,
                                   int64_t vocab_start, int64_t vocab_end);

}  // namespace partrain::runner
