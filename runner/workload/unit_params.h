// An acquired unit's parameters and gradients as the ops read and write them. Matrices (GEMM
// weights, embedding tables) as stored: fp32, or bf16 under bf16 model states, which the matmul
// and embedding ops read directly (no widened copy, no rounding pass: docs/ops.md "bf16 model
// states"). Vectors (layernorm weights, biases: the 1-D parameters) in fp32, widened under bf16
// into one workspace buffer for as long as the UnitParams lives, a few kilobytes a layer instead
// of the unit's fp32 copy. Gradients likewise: under bf16 gradients (DDP, ZeRO-1) the matmuls add
// into the bf16 matrices' gradients themselves, and the vectors' (and any table a scatter adds
// into: fp32_grad) are staged in fp32 and added, rounded, by flush(), which the holder calls
// before releasing the unit.
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

// The matrix starting at unit-local `offset` of an acquired view, and its gradient, as stored.
Matrix matrix_at(const UnitView& view, int64_t offset);
MutableMatrix matrix_grad_at(const UnitView& view, int64_t offset);

class UnitParams {
 public:
  UnitParams() = default;
  // `view` is an acquired view of `unit`; under bf16 storage its vectors are widened here, and in
  // a backward pass over bf16 gradients their fp32 gradients are staged (zeroed).
  static StatusOr<UnitParams> bind(Device& device, const UnitView& view, const ParamUnit& unit);

  // Offsets are unit-local (0 = the unit's first parameter), as in UnitView.
  Matrix matrix(int64_t offset) const { return matrix_at(view_, offset); }
  MutableMatrix matrix_grad(int64_t offset) const { return matrix_grad_at(view_, offset); }
  // A 1-D parameter's fp32 values; nullptr where no 1-D parameter starts at `offset` under bf16.
  const float* vector(int64_t offset) const;
  // A 1-D parameter's fp32 gradient: the unit's own, or its staging under bf16 gradients;
  // nullptr where the pass keeps no gradients.
  float* grad(int64_t offset) const;
  // Any parameter's gradient in fp32, for an op that scatters into it (the embedding's backward):
  // the unit's own, or under bf16 gradients a zeroed staging of the parameter that flush() adds.
  StatusOr<float*> fp32_grad(int64_t offset);
  // Adds what is staged, rounded once, into the bf16 gradients, and drops it. Call before the
  // unit is released (DDP reports it ready then); nothing to do without bf16 gradients.
  void flush();

 private:
  struct Staged {
    int64_t offset = 0;  // in the unit
    Tensor grads;        // fp32, zeroed when staged
    float* data = nullptr;
  };
  Device* device_ = nullptr;
  const ParamUnit* unit_ = nullptr;
  UnitView view_;
  Tensor widened_;  // bf16 storage: the vectors, one after another, in fp32
  std::vector<std::pair<int64_t, int64_t>> widened_at_;  // (unit offset, offset in widened_)
  std::vector<Staged> staged_;  // bf16 gradients: what flush() adds
};

}  // namespace partrain::runner
