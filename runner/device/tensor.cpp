#include "runner/device/tensor.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

namespace partrain::runner {

size_t element_size(ElementType type) { return type == ElementType::kBf16 ? 2 : sizeof(float); }

StatusOr<Tensor> Tensor::create(TrackedAllocator& allocator, std::vector<int64_t> shape,
                                memory::Category category, ElementType type) {
  int64_t numel = 1;
  for (int64_t extent : shape) {
    if (extent < 0) {
      return invalid_argument("tensor shape [{}] has a negative dimension", fmt::join(shape, ", "));
    }
    numel *= extent;
  }
  Tensor tensor;
  ASSIGN_OR_RETURN(tensor.buffer_,
                   allocator.allocate(static_cast<size_t>(numel) * element_size(type), category));
  tensor.shape_ = std::move(shape);
  tensor.numel_ = numel;
  tensor.type_ = type;
  return tensor;
}

StatusOr<Tensor> Tensor::zeros(Device& device, std::vector<int64_t> shape,
                               memory::Category category) {
  ASSIGN_OR_RETURN(Tensor tensor, create(device.allocator(), std::move(shape), category));
  if (tensor.numel_ > 0) device.fill(tensor.data(), tensor.numel_, 0.0f);
  return tensor;
}

void Tensor::fill(float value) { std::fill_n(data(), numel_, value); }

Status Tensor::copy_from(std::span<const float> source) {
  if (source.size() != static_cast<size_t>(numel_)) {
    return invalid_argument("cannot copy {} values into a tensor of shape {} ({} values)",
                            source.size(), shape_string(), numel_);
  }
  std::copy(source.begin(), source.end(), data());
  return Status::ok();
}

std::string Tensor::shape_string() const { return fmt::format("[{}]", fmt::join(shape_, ", ")); }

}  // namespace partrain::runner
