// A minimal tensor for the reference workloads: a shape and a contiguous row-major block of fp32
// or bf16 elements (bf16 model states and activations under the bf16 recipes) in a tracked
// buffer, so its bytes count toward a memory::Category. No views, no strides: ops take raw pointers and dimensions (llm.c style), a
// Tensor only owns and describes memory.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "memory/category.h"
#include "runner/device/device.h"
#include "runner/device/tracked_allocator.h"

namespace partrain::runner {

enum class ElementType { kF32, kBf16 };
size_t element_size(ElementType type);  // 4, 2

class Tensor {
 public:
  Tensor() = default;  // empty: no shape, numel 0, data nullptr

  // Uninitialised contents. Fails on a negative dimension or when the allocator cannot.
  static StatusOr<Tensor> create(TrackedAllocator& allocator, std::vector<int64_t> shape,
                                 memory::Category category,
                                 ElementType type = ElementType::kF32);
  // From the device's allocator, zero-filled by the device.
  static StatusOr<Tensor> zeros(Device& device, std::vector<int64_t> shape,
                                memory::Category category);

  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t dim(size_t axis) const { return shape_.at(axis); }
  int64_t numel() const { return numel_; }
  ElementType type() const { return type_; }
  size_t bytes() const { return static_cast<size_t>(numel_) * element_size(type_); }
  memory::Category category() const { return buffer_.category(); }
  // The elements of an fp32 tensor (a bf16 one's are bf16_data()).
  float* data() { return static_cast<float*>(buffer_.data()); }
  const float* data() const { return static_cast<const float*>(buffer_.data()); }
  uint16_t* bf16_data() { return static_cast<uint16_t*>(buffer_.data()); }
  const uint16_t* bf16_data() const { return static_cast<const uint16_t*>(buffer_.data()); }
  // Element `index`, whatever the type: where a communicator reads or writes from.
  void* at(int64_t index) {
    return static_cast<char*>(buffer_.data()) + index * static_cast<int64_t>(element_size(type_));
  }
  std::span<float> values() { return {data(), static_cast<size_t>(numel_)}; }
  std::span<const float> values() const { return {data(), static_cast<size_t>(numel_)}; }

  // Host memory only (a device tensor is filled through its Device).
  void fill(float value);
  // Copies exactly numel() values; fails naming both sizes otherwise.
  Status copy_from(std::span<const float> source);

  // "[4, 128, 768]", for messages.
  std::string shape_string() const;

 private:
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  ElementType type_ = ElementType::kF32;
  TrackedBuffer buffer_;
};

}  // namespace partrain::runner
