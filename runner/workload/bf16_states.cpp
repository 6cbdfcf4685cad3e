#include "runner/workload/bf16_states.h"

namespace partrain::runner {

void adamw_update(Device& device, float* values, Tensor& grads, int64_t offset, float* m,
                  float* v, int64_t n, const ops::AdamWConfig& config, int64_t step,
                  uint16_t* bf16_params) {
  if (n <= 0) return;
  if (grads.type() == ElementType::kF32) {
    device.adamw_update(values, grads.data() + offset, m, v, n, config, step, bf16_params);
  } else {
    device.adamw_update(values, grads.bf16_data() + offset, m, v, n, config, step, bf16_params);
  }
}

double sum_of_squares(Device& device, const Tensor& values, int64_t begin, int64_t n) {
  if (values.type() == ElementType::kF32) return device.sum_of_squares(values.data() + begin, n);
  return device.sum_of_squares(values.bf16_data() + begin, n);
}

comm::DType wire_dtype(const Tensor& tensor) {
  return tensor.type() == ElementType::kBf16 ? comm::DType::kBF16 : comm::DType::kF32;
}

}  // namespace partrain::runner
