// GPU memory for the tracked allocator: cudaMalloc and cudaFree on one device, so a CUDA device's
// buffers are counted per category exactly as the CPU device's are (tracked_allocator.h).
#pragma once

#include <cstddef>
#include <string>

#include "runner/device/tracked_allocator.h"

namespace partrain::runner {

class CudaMemory final : public RawMemory {
 public:
  explicit CudaMemory(int ordinal) : ordinal_(ordinal) {}

  std::string name() const override { return "cuda:" + std::to_string(ordinal_); }
  // nullptr when cudaMalloc refuses (out of memory, or a broken context); the allocator turns that
  // into a Status naming the category and size. The CUDA error is cleared so that it is not taken
  // for a later kernel's.
  void* allocate(size_t bytes) override;
  // cudaFree waits for the device, so a buffer still used by queued work is not freed under it.
  void free(void* pointer, size_t bytes) override;

 private:
  int ordinal_;
};

}  // namespace partrain::runner
