#include "runner/workload/tensor_parallel.h"

namespace partrain::runner {

// Sequence shards live as (B, T/tp, C) per rank; gathered blocks arrive rank-major, as
// (tp, B, T/tp, C), and are interleaved back into (B, T, C).
Status TensorParallel::enter_forward(const float* local, float* full, int64_t B, int64_t T,
                                     int64_t C) {
  if (!sequence_parallel()) {
    if (full != local) device_.copy(full, local, B * T * C);
    return Status::ok();
  }
  const int64_t n = size();
  const int64_t t_local = T / n;
  const int64_t block = B * t_local * C;
  ASSIGN_OR_RETURN(float* gathered, staging(block * n));
  RETURN_IF_ERROR(tp_.all_gather(local, gathered, static_cast<size_t>(block), comm::DType::kF32));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < B; ++b) {
      device_.copy(full + (b * T + r * t_local) * C, gathered + r * block + b * t_local * C,
                   t_local * C);
    }
  }
  return Status::ok();
}

Status TensorParallel::enter_backward(const float* full_grad, float* local_grad, int64_t B,
                                      int64_t T, int64_t C) {
  const int64_t n = size();
  if (n == 1) {
    if (local_grad != full_grad) device_.copy(local_grad, full_grad, B * T * C);
    return Status::ok();
  }
  if (!sequence_parallel()) {
    return tp_.all_reduce(full_grad, local_grad, static_cast<size_t>(B * T * C),
                          comm::DType::kF32, comm::ReduceOp::kSum);
  }
  const int64_t t_local = T / n;
  const int64_t block = B * t_local * C;
  ASSIGN_OR_RETURN(float* blocks, staging(block * n));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < B; ++b) {
      device_.copy(blocks + r * block + b * t_local * C, full_grad + (b * T + r * t_local) * C,
                   t_local * C);
    }
  }
  return tp_.reduce_scatter(blocks, local_grad, static_cast<size_t>(block),
                            comm::DType::kF32, comm::ReduceOp::kSum);
}

StatusOr<const float*> TensorParallel::region_input(const Tensor& saved, const float* values,
                                                    Tensor& gathered, int64_t B, int64_t T,
                                                    int64_t C) {
  if (!sequence_parallel()) return values;
  if (gathered.numel() != B * T * C) {
    ASSIGN_OR_RETURN(gathered,
                     Tensor::create(device_.allocator(), {B * T, C}, memory::Category::kWorkspace));
  }
  if (saved.type() == ElementType::kF32) {
    RETURN_IF_ERROR(enter_forward(values, gathered.data(), B, T, C));
    return static_cast<const float*>(gathered.data());
  }
  const int64_t n = size();
  const int64_t t_local = T / n;
  const int64_t block = B * t_local * C;
  ASSIGN_OR_RETURN(void* staged, staging_bytes(static_cast<size_t>(block * n) * sizeof(uint16_t)));
  auto* blocks = static_cast<uint16_t*>(staged);
  RETURN_IF_ERROR(tp_.all_gather(saved.bf16_data(), blocks, static_cast<size_t>(block),
                                 comm::DType::kBF16));
  float* full = gathered.data();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < B; ++b) {
      device_.from_bf16(full + (b * T + r * t_local) * C, blocks + r * block + b * t_local * C,
                        t_local * C);
    }
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
