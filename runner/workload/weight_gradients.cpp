#include "runner/workload/weight_gradients.h"

#include <utility>

#include "runner/workload/activation_store.h"

namespace partrain::runner {

Status WeightGradients::matmul_backward(float* dinp, MutableMatrix dweight, float* dbias,
                                        const float* dout, Tensor inp, Matrix weight, int64_t N,
                                        int64_t C, int64_t OC) {
  if (!defer_ || dweight.empty()) {
    device_.matmul_backward(dinp, dweight, dbias, dout, ActivationStore::operand(inp), weight, N, C,
                            OC);
    return Status::ok();
  }
  device_.matmul_backward(dinp, nullptr, dbias, dout, nullptr, weight, N, C, OC);
  // What W reads stays alive until it runs: the zero-bubble schedules' extra memory, counted as
  // activations (Qi 2023 sec. 3: W keeps its GEMM's input and output gradient).
  ASSIGN_OR_RETURN(Tensor copy,
                   Tensor::create(device_.allocator(), {N, OC}, memory::Category::kActivations));
  device_.copy(copy.data(), dout, N * OC);
  pending_.push_back({dweight, std::move(copy), std::move(inp), N, C, OC});
  return Status::ok();
}

void WeightGradients::run() {
  for (Pending& p : pending_) {
    device_.matmul_backward(nullptr, p.dweight, nullptr, p.dout.data(),
                            ActivationStore::operand(p.inp), nullptr, p.N, p.C, p.OC);
  }
  pending_.clear();
}

}  // namespace partrain::runner
