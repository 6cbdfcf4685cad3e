// Device buffers for the NCCL benchmark (compiled only with CUDA).
#include <cuda_runtime_api.h>

#include "cli/bench/buffer_space.h"

namespace partrain::bench {
namespace {

Status cuda_status(cudaError_t error, std::string_view call) {
  if (error == cudaSuccess) return Status::ok();
  return failed("{} failed: {} ({})", call, cudaGetErrorString(error), cudaGetErrorName(error));
}

class CudaBufferSpace final : public BufferSpace {
 public:
  explicit CudaBufferSpace(int device) : name_(fmt::format("cuda:{}", device)) {}
  std::string_view name() const override { return name_; }
  StatusOr<void*> allocate(size_t bytes) override {
    void* buffer = nullptr;
    RETURN_IF_ERROR(cuda_status(cudaMalloc(&buffer, bytes == 0 ? 64 : bytes), "cudaMalloc"));
    return buffer;
  }
  void release(void* buffer) override { cudaFree(buffer); }
  Status upload(void* device, const void* host, size_t bytes) override {
    return cuda_status(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  Status download(void* host, const void* device, size_t bytes) override {
    return cuda_status(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

 private:
  std::string name_;
};

}  // namespace

StatusOr<std::unique_ptr<BufferSpace>> make_cuda_buffer_space(int device) {
  RETURN_IF_ERROR(cuda_status(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device)));
  return std::unique_ptr<BufferSpace>(std::make_unique<CudaBufferSpace>(device));
}

}  // namespace partrain::bench
