// Megatron's tensor-parallel communication (Shoeybi et al. 2019, sec. 3; Korthikanti et al.
// 2022, sec. 4): the conjugate f / g operators around column- and row-parallel layers, and with
// sequence parallelism their all-gather / reduce-scatter forms along the sequence. With one tp
// rank every operation is a copy or nothing.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "runner/comm/comm.h"
#include "runner/device/device.h"
#include "runner/device/tensor.h"
#include "runner/device/tracked_allocator.h"

namespace partrain::runner {

class TensorParallel {
 public:
  // `tp` may be a communicator of one rank. B and T are the micro-batch's full shape. The
  // sequence-parallel staging buffer comes from `device`'s memory (category comm) and is reused;
  // the sequence blocks are rearranged by device copies.
  TensorParallel(comm::Comm& tp, bool sequence_parallel, Device& device)
      : tp_(tp), sp_(sequence_parallel), device_(device) {}

  int rank() const { return tp_.rank(); }
  int size() const { return tp_.size(); }
  bool sequence_parallel() const { return sp_ && tp_.size() > 1; }
  // Rows of a (B, T, C) activation this rank holds outside tensor-parallel regions.
  int64_t local_tokens(int64_t B, int64_t T) const {
    return sequence_parallel() ? B * (T / tp_.size()) : B * T;
  }

  // Entering a tensor-parallel region: f is the identity (SP: all-gather the sequence shards of
  // `local` into `full` (B, T, C)). `full` may alias `local` without SP.
  Status enter_forward(const float* local, float* full, int64_t B, int64_t T, int64_t C);
  // Its backward: sum the partial input gradients over tp (SP: reduce-scatter to the shard).
  Status enter_backward(const float* full_grad, float* local_grad, int64_t B, int64_t T,
                        int64_t C);
  // Leaving a tensor-parallel region: g sums the partial outputs (SP: reduce-scatter).
  Status exit_forward(const float* partial, float* local, int64_t B, int64_t T, int64_t C) {
    return enter_backward(partial, local, B, T, C);
  }
  // Its backward: the identity (SP: all-gather the gradient's sequence shards).
  Status exit_backward(const float* local_grad, float* full_grad, int64_t B, int64_t T,
                       int64_t C) {
    return enter_forward(local_grad, full_grad, B, T, C);
  }
  // The input of a column-parallel layer, in fp32, from a saved activation: the activation itself
  // (fp32), or under SP its all-gather into `gathered` (fp32 workspace the caller keeps while it
  // needs the input; backward calls this again instead of saving the gathered copy). A bf16
  // activation is gathered in bf16, half the bytes, as Megatron's SP, and widened while it is
  // laid out; without SP it is `values` (its fp32 values, where the caller has them, as the
  // forward does) or else widened into `gathered`.
  StatusOr<const float*> region_input(const Tensor& saved, Tensor& gathered, int64_t B,
                                      int64_t T, int64_t C, const float* values = nullptr);
  // Sums (or maxes) `n` fp32 values over tp in place (vocab-parallel cross-entropy).
  Status all_reduce(float* values, int64_t n, comm::ReduceOp op = comm::ReduceOp::kSum);
  // Sums `n` gradients of `dtype` (fp32 or bf16) over tp in place (SP layernorm grads).
  Status sum_gradients(void* grads, int64_t n, comm::DType dtype);

 private:
  // The (tp, B, T/tp, C) rank-major blocks of a gather or scatter: grown once, reused by every
  // layer and micro-batch, so the training step allocates nothing here after the first.
  StatusOr<float*> staging(int64_t numel);
  StatusOr<void*> staging_bytes(size_t bytes);
  template <typename Move>
  void for_each_run(int64_t B, int64_t T, int64_t C, Move move) const;

  comm::Comm& tp_;
  bool sp_;
  Device& device_;
  TrackedBuffer staging_;
};

}  // namespace partrain::runner
