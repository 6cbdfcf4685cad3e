#include <cuda_runtime.h>

#include "runner/device/cuda_memory.h"

namespace partrain::runner {

void* CudaMemory::allocate(size_t bytes) {
  void* pointer = nullptr;
  if (cudaSetDevice(ordinal_) != cudaSuccess || cudaMalloc(&pointer, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // clears a non-sticky error such as cudaErrorMemoryAllocation
    return nullptr;
  }
  return pointer;
}

void CudaMemory::free(void* pointer, size_t /*bytes*/) {
  if (pointer == nullptr) return;
  // A failure here (a context already broken by an earlier kernel) has been reported by the
  // device that owns the allocator; freeing has nothing left to do about it.
  (void)cudaSetDevice(ordinal_);
  (void)cudaFree(pointer);
}

}  // namespace partrain::runner
