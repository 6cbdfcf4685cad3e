#include "runner/workload/bf16_states.h"

#include <algorithm>

#include "runner/device/tensor.h"

namespace partrain::runner {

namespace {

StatusOr<Tensor> chunk_buffer(Device& device, int64_t n) {
  return Tensor::create(device.allocator(), {std::min(n, kBf16Chunk)},
                        memory::Category::kWorkspace);
}

}  // namespace

Status adamw_from_bf16_grads(Device& device, float* master, uint16_t* params,
                             const uint16_t* grads, float* m, float* v, int64_t n,
                             const ops::AdamWConfig& config, int64_t step) {
  if (n <= 0) return Status::ok();
  ASSIGN_OR_RETURN(Tensor widened, chunk_buffer(device, n));
  for (int64_t begin = 0; begin < n; begin += kBf16Chunk) {
    const int64_t count = std::min(kBf16Chunk, n - begin);
    device.from_bf16(widened.data(), grads + begin, count);
    device.adamw_update(master + begin, widened.data(), m + begin, v + begin, count, config, step);
  }
  device.to_bf16(params, master, n);
  return Status::ok();
}

StatusOr<double> bf16_sum_of_squares(Device& device, const uint16_t* x, int64_t n) {
  if (n <= 0) return 0.0;
  ASSIGN_OR_RETURN(Tensor widened, chunk_buffer(device, n));
  double sum = 0;
  for (int64_t begin = 0; begin < n; begin += kBf16Chunk) {
    const int64_t count = std::min(kBf16Chunk, n - begin);
    device.from_bf16(widened.data(), x + begin, count);
    sum += device.sum_of_squares(widened.data(), count);
  }
  return sum;
}

}  // namespace partrain::runner
