#include "runner/workload/bf16_states.h"

#include <algorithm>

namespace partrain::runner {

namespace {

StatusOr<Tensor> chunk_buffer(Device& device, int64_t n) {
  return Tensor::create(device.allocator(), {std::min(n, kBf16Chunk)},
                        memory::Category::kWorkspace);
}

}  // namespace

Status adamw_update(Device& device, float* values, Tensor& grads, int64_t offset, float* m,
                    float* v, int64_t n, const ops::AdamWConfig& config, int64_t step,
                    uint16_t* bf16_params) {
  if (n <= 0) return Status::ok();
  if (grads.type() == ElementType::kF32) {
    device.adamw_update(values, grads.data() + offset, m, v, n, config, step);
  } else {
    ASSIGN_OR_RETURN(Tensor widened, chunk_buffer(device, n));
    for (int64_t chunk = 0; chunk < n; chunk += kBf16Chunk) {
      const int64_t count = std::min(kBf16Chunk, n - chunk);
      device.from_bf16(widened.data(), grads.bf16_data() + offset + chunk, count);
      device.adamw_update(values + chunk, widened.data(), m + chunk, v + chunk, count, config,
                          step);
    }
  }
  if (bf16_params != nullptr) device.to_bf16(bf16_params, values, n);
  return Status::ok();
}

StatusOr<double> sum_of_squares(Device& device, Tensor& values, int64_t begin, int64_t n) {
  if (values.type() == ElementType::kF32) return device.sum_of_squares(values.data() + begin, n);
  if (n <= 0) return 0.0;
  const uint16_t* x = values.bf16_data() + begin;
  ASSIGN_OR_RETURN(Tensor widened, chunk_buffer(device, n));
  double sum = 0;
  for (int64_t chunk = 0; chunk < n; chunk += kBf16Chunk) {
    const int64_t count = std::min(kBf16Chunk, n - chunk);
    device.from_bf16(widened.data(), x + chunk, count);
    sum += device.sum_of_squares(widened.data(), count);
  }
  return sum;
}

comm::DType wire_dtype(const Tensor& tensor) {
  return tensor.type() == ElementType::kBf16 ? comm::DType::kBF16 : comm::DType::kF32;
}

}  // namespace partrain::runner
