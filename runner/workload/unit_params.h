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
#include "runner/workload/activation_store.h"
#include "runner/workload/param_access.h"
#include "runner/workload/param_layout.h"

namespace partrain::runner {

// A matrix parameter in the type it is stored in: exactly one pointer is set (none for an
// absent one, such as wpe on a tensor-parallel rank that does not add it).
struct Weight {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
};

// Where a matrix's gradient accumulates, in the type it is stored in: at most one pointer is
// set (none where the pass keeps no gradients).
struct WeightGrad {
  float* f32 = nullptr;
  uint16_t* bf16 = nullptr;
};

// The matrix starting at unit-local `offset` of an acquired view, and its gradient, as stored.
Weight matrix_at(const UnitView& view, int64_t offset);
WeightGrad matrix_grad_at(const UnitView& view, int64_t offset);

class UnitParams {
 public:
  UnitParams() = default;
  // `view` is an acquired view of `unit`; under bf16 storage its vectors are widened here, and in
  // a backward pass over bf16 gradients their fp32 gradients are staged (zeroed).
  static StatusOr<UnitParams> bind(Device& device, const UnitView& view, const ParamUnit& unit);

  // Offsets are unit-local (0 = the unit's first parameter), as in UnitView.
  Weight matrix(int64_t offset) const { return matrix_at(view_, offset); }
  WeightGrad matrix_grad(int64_t offset) const { return matrix_grad_at(view_, offset); }
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

// The matmul and embedding ops (Device) on a Weight and an input Activation, in whichever type
// each is stored. A bf16 WeightGrad or Activation needs a bf16 Weight (bf16 gradients and
// activations come with bf16 parameters).
void matmul_forward(Device& device, float* out, Activation inp, Weight weight, const float* bias,
                    int64_t N, int64_t C, int64_t OC);
void matmul_backward(Device& device, float* dinp, WeightGrad dweight, float* dbias,
                     const float* dout, Activation inp, Weight weight, int64_t N, int64_t C,
                     int64_t OC);
void embedding_forward_vocab_range(Device& device, float* out, const int32_t* tokens,
                                   Weight wte_shard, Weight wpe, int64_t B, int64_t T, int64_t C,
                                   int64_t vocab_start, int64_t vocab_end);

}  // namespace partrain::runner
