// The activations a model chunk keeps between forward and backward, in the run's storage type:
// fp32, or bf16 under the bf16 recipes (2 bytes an element, as `partrain memory` counts them).
// The GEMM ops (matmul, attention) and GeLU read their saved inputs as stored (operand()), and
// attention and GeLU write theirs as stored (target()). The other ops read and write fp32, so such
// an op writes a bf16 activation through an fp32 buffer that store() rounds into it (nearest even),
// and reads one widened back into an fp32 buffer. Each op thus computes in fp32 from bf16 inputs
// and rounds what it keeps: the numerics of a kernel that loads and stores bf16 and computes in
// fp32, at the cost of a pass over each tensor and its fp32 size in workspace while the op runs.
// Layernorm statistics, logits and activation gradients stay fp32 (docs/ops.md "bf16
// activations").
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"

namespace partrain::runner {

class ActivationStore {
 public:
  ActivationStore(Device& device, ElementType type) : device_(device), type_(type) {}

  // The fp32 values of an activation while an op writes them (Output) or reads them (Input): the
  // activation's own elements when it is fp32, else a workspace buffer that lives as long as this.
  class Output {
   public:
    float* data() const { return data_; }

   private:
    friend class ActivationStore;
    float* data_ = nullptr;
    Tensor workspace_;
  };
  class Input {
   public:
    const float* data() const { return data_; }

   private:
    friend class ActivationStore;
    const float* data_ = nullptr;
    Tensor workspace_;
  };

  ElementType type() const { return type_; }

  // A new activation of `shape` in the storage type (memory::Category::kActivations),
  // uninitialised.
  StatusOr<Tensor> create(std::vector<int64_t> shape) const;
  // Where an op writes `saved`'s values (uninitialised); store() then keeps them.
  StatusOr<Output> output(Tensor& saved) const;
  // Rounds `values` (from output(saved)) into `saved`, and leaves the rounded values in `values`
  // for the ops that read them next, so they see what backward will. Nothing to do in fp32.
  void store(Output& values, Tensor& saved) const;
  // The same for values no op reads again in fp32 (the next op reads `saved`: the GEMMs as
  // stored, the next block widened): rounded into `saved` without being written back, and the
  // workspace goes with `values`.
  void keep(Output values, Tensor& saved) const;
  // The values of `saved`, widened when it is bf16.
  StatusOr<Input> input(const Tensor& saved) const;
  // `saved` as the input of an op that reads bf16 as it lies (matmul, attention, GeLU).
  static Matrix operand(const Tensor& saved);
  // `saved` as an op's output written as stored (attention's probabilities, GeLU's output).
  static MutableMatrix target(Tensor& saved);
  // Writes `source` (saved.numel() floats) into `saved`, rounded when it is bf16.
  void assign(Tensor& saved, const float* source) const;
  // Writes `saved`'s values into `destination` (saved.numel() floats), widened when bf16.
  void copy_out(float* destination, const Tensor& saved) const;
  // destination = source, element for element: both of the same type and size (a pipeline
  // boundary buffer and the activation it carries); fails naming both otherwise.
  Status copy(Tensor& destination, const Tensor& source) const;

 private:
  Device& device_;
  ElementType type_;
};

}  // namespace partrain::runner
