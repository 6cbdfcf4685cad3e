#include "runner/workload/tensor_parallel.h"

namespace partrain::runner {

// Sequence shards live as (B, T/tp, C) per rank; gathered blocks arrive rank-major, as
// (tp, B, T/tp, C). Calls move(full_offset, block_offset, count) for each run of t_local rows,
// which is how they interleave back into (B, T, C) (and out of it, for a reduce-scatter).
template <typename Move>
void TensorParallel::for_each_run(int64_t B, int64_t T, int64_t C, Move move) const {
  const int64_t n = size();
  const int64_t t_local = T / n;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < B; ++b) {
      move((b * T + r * t_local) * C, (r * B + b) * t_local * C, t_local * C);
    }
  }
}

Status TensorParallel::enter_forward(const float* local, float* full, int64_t B, int64_t T,
                                     int64_t C) {
  if (!sequence_parallel()) {
    if (full != local) device_.copy(full, local, B * T * C);
    return Status::ok();
  }
  const int64_t block = B * (T / size()) * C;
  ASSIGN_OR_RETURN(float* gathered, staging(block * size()));
  RETURN_IF_ERROR(tp_.all_gather(local, gathered, static_cast<size_t>(block), comm::DType::kF32));
  for_each_run(B, T, C, [&](int64_t at_full, int64_t at_block, int64_t count) {
    device_.copy(full + at_full, gathered + at_block, count);
  });
  return Status::ok();
}

Status TensorParallel::enter_backward(const float* full_grad, float* local_grad, int64_t B,
                                      int64_t T, int64_t C) {
  if (size() == 1) {
    if (local_grad != full_grad) device_.copy(local_grad, full_grad, B * T * C);
    return Status::ok();
  }
  if (!sequence_parallel()) {
    return tp_.all_reduce(full_grad, local_grad, static_cast<size_t>(B * T * C),
                          comm::DType::kF32, comm::ReduceOp::kSum);
  }
  const int64_t block = B * (T / size()) * C;
  ASSIGN_OR_RETURN(float* blocks, staging(block * size()));
  for_each_run(B, T, C, [&](int64_t at_full, int64_t at_block, int64_t count) {
    device_.copy(blocks + at_block, full_grad + at_full, count);
  });
  return tp_.reduce_scatter(blocks, local_grad, static_cast<size_t>(block),
                            comm::DType::kF32, comm::ReduceOp::kSum);
}

StatusOr<const float*> TensorParallel::region_input(const Tensor& saved, Tensor& gathered,
                                                    int64_t B, int64_t T, int64_t C,
                                                    const float* values) {
  const bool bf16 = saved.type() == ElementType::kBf16;
  if (!sequence_parallel() && !bf16) return saved.data();
  if (!sequence_parallel() && values != nullptr) return values;
  if (gathered.numel() != B * T * C) {
    ASSIGN_OR_RETURN(gathered,
                     Tensor::create(device_.allocator(), {B * T, C}, memory::Category::kWorkspace));
  }
  float* full = gathered.data();
  if (!sequence_parallel()) {
    device_.from_bf16(full, saved.bf16_data(), saved.numel());
  } else if (!bf16) {
    RETURN_IF_ERROR(enter_forward(saved.data(), full, B, T, C));
  } else {
    const int64_t block = B * (T / size()) * C;
    ASSIGN_OR_RETURN(void* staged,
                     staging_bytes(static_cast<size_t>(block * size()) * sizeof(uint16_t)));
    auto* blocks = static_cast<uint16_t*>(staged);
    RETURN_IF_ERROR(tp_.all_gather(saved.bf16_data(), blocks, static_cast<size_t>(block),
                                   comm::DType::kBF16));
    for_each_run(B, T, C, [&](int64_t at_full, int64_t at_block, int64_t count) {
      device_.from_bf16(full + at_full, blocks + at_block, count);
    });
  }
  return static_cast<const float*>(full);
}

StatusOr<void*> TensorParallel::staging_bytes(size_t bytes) {
  RETURN_IF_ERROR(device_.allocator().grow(staging_, bytes, memory::Category::kComm));
  return staging_.data();
}

StatusOr<float*> TensorParallel::staging(int64_t numel) {
  ASSIGN_OR_RETURN(void* staged, staging_bytes(static_cast<size_t>(numel) * sizeof(float)));
  return static_cast<float*>(staged);
}

Status TensorParallel::all_reduce(float* values, int64_t n, comm::ReduceOp op) {
  if (size() == 1) return Status::ok();
  return tp_.all_reduce(values, values, static_cast<size_t>(n), comm::DType::kF32, op);
}

Status TensorParallel::sum_gradients(void* grads, int64_t n, comm::DType dtype) {
  if (size() == 1) return Status::ok();
  return tp_.all_reduce(grads, grads, static_cast<size_t>(n), dtype, comm::ReduceOp::kSum);
}

}  // namespace partrain::runner
