// The weight-gradient half of a backward (Qi 2023's W), for the zero-bubble pipeline schedules:
// a layer's backward computes its input gradient at once and hands the weight-gradient GEMM
// here. Without deferral it runs at once (every other schedule); deferred, the GEMM's inputs
// (its output gradient, copied, and its saved input, moved in) wait here until the schedule's W
// pass runs them. Every layer calls the same helper, so layers added later split the same way.
#pragma once

#include <vector>

#include "core/status.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"

namespace partrain::runner {

class WeightGradients {
 public:
  WeightGradients(Device& device, bool defer) : device_(device), defer_(defer) {}

  bool deferring() const { return defer_; }

  // A linear layer's backward, out = inp @ weight^T + bias over N rows (matmul_backward):
  // dinp (+)= dout @ weight and dbias += sum dout now; dweight += dout^T @ inp now, or when run()
  // is called if deferring. `inp` is the layer's saved input, moved in and read as stored
  // (ActivationStore::operand): deferred, it is held until run(); otherwise it is freed on
  // return, as the caller would have freed it. The gradient `dweight` points into must stay where
  // it is until run() (DDP and ZeRO-1 flat buffers; check_runnable refuses ZeRO-2 and FSDP with a
  // split backward).
  Status matmul_backward(float* dinp, MutableMatrix dweight, float* dbias, const float* dout,
                         Tensor inp, Matrix weight, int64_t N, int64_t C, int64_t OC);

  // Runs the deferred GEMMs in the order they were queued and frees what they kept.
  void run();
  bool empty() const { return pending_.empty(); }

 private:
  struct Pending {
    MutableMatrix dweight;
    Tensor dout;  // fp32 N x OC, a copy (the caller reuses its buffer)
    Tensor inp;
    int64_t N = 0, C = 0, OC = 0;
  };
  Device& device_;
  bool defer_;
  std::vector<Pending> pending_;
};

}  // namespace partrain::runner
