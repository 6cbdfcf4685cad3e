// Where benchmark buffers live: host memory for Gloo, device memory for NCCL. The harness only
// allocates, uploads and downloads through this, so one loop serves both backends.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "core/status.h"

namespace partrain::bench {

class BufferSpace {
 public:
  virtual ~BufferSpace() = default;
  virtual std::string_view name() const = 0;  // "cpu" or "cuda:N"
  virtual StatusOr<void*> allocate(size_t bytes) = 0;
  virtual void release(void* buffer) = 0;
  virtual Status upload(void* device, const void* host, size_t bytes) = 0;
  virtual Status download(void* host, const void* device, size_t bytes) = 0;
};

std::unique_ptr<BufferSpace> make_host_buffer_space();
// Device memory on GPU `device` (compiled with CUDA only; otherwise an error naming the fix).
StatusOr<std::unique_ptr<BufferSpace>> make_cuda_buffer_space(int device);

// A buffer released when it goes out of scope.
class ScopedBuffer {
 public:
  ScopedBuffer(BufferSpace& space, void* data) : space_(&space), data_(data) {}
  ScopedBuffer(const ScopedBuffer&) = delete;
  ScopedBuffer& operator=(const ScopedBuffer&) = delete;
  ~ScopedBuffer() { space_->release(data_); }
  void* get() const { return data_; }

 private:
  BufferSpace* space_;
  void* data_;
};

}  // namespace partrain::bench
