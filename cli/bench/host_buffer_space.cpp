#include <cstdlib>
#include <cstring>

#include "cli/bench/buffer_space.h"

namespace partrain::bench {
namespace {

class HostBufferSpace final : public BufferSpace {
 public:
  std::string_view name() const override { return "cpu"; }
  StatusOr<void*> allocate(size_t bytes) override {
    // 64-byte aligned like a cache line; at least one line so zero-size buffers are valid.
    size_t rounded = (bytes + 63) / 64 * 64;
    void* buffer = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (buffer == nullptr) return failed("could not allocate {} bytes of host memory", bytes);
    return buffer;
  }
  void release(void* buffer) override { std::free(buffer); }
  Status upload(void* device, const void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(device, host, bytes);
    return Status::ok();
  }
  Status download(void* host, const void* device, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, device, bytes);
    return Status::ok();
  }
};

}  // namespace

std::unique_ptr<BufferSpace> make_host_buffer_space() {
  return std::make_unique<HostBufferSpace>();
}

#ifndef PARTRAIN_HAVE_CUDA
StatusOr<std::unique_ptr<BufferSpace>> make_cuda_buffer_space(int) {
  return invalid_argument("this partrain was built without CUDA: use --backend gloo, or rebuild "
                          "with -DPARTRAIN_CUDA=ON");
}
#endif

}  // namespace partrain::bench
