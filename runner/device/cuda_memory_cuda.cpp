#include <cuda_runtime.h>

#include "runner/device/cuda_memory.h"

namespace partrain::runner {

size_t CudaMemory::block_bytes(size_t bytes) {
  const size_t granule = bytes < kLargeBlock ? kSmallGranule : kLargeBlock;
  return bytes == 0 ? granule : (bytes + granule - 1) / granule * granule;
}

CudaMemory::~CudaMemory() { release_cached(); }

void* CudaMemory::allocate(size_t bytes) {
  const size_t size = block_bytes(bytes);
  std::lock_guard lock(mutex_);
  if (auto cached = cached_.find(size); cached != cached_.end()) {
    void* pointer = cached->second;
    cached_.erase(cached);
    cached_bytes_ -= size;
    in_use_.emplace(pointer, size);
    return pointer;
  }
  if (cudaSetDevice(ordinal_) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  void* pointer = nullptr;
  if (cudaMalloc(&pointer, size) != cudaSuccess) {
    (void)cudaGetLastError();  // clears a non-sticky error such as cudaErrorMemoryAllocation
    if (cached_.empty()) return nullptr;
    release_cached_locked();  // blocks of other sizes may make room
    if (cudaMalloc(&pointer, size) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
  }
  reserved_ += size;
  in_use_.emplace(pointer, size);
  return pointer;
}

void CudaMemory::free(void* pointer, size_t /*bytes*/) {
  if (pointer == nullptr) return;
  std::lock_guard lock(mutex_);
  auto block = in_use_.find(pointer);
  if (block == in_use_.end()) return;  // not ours: nothing to keep
  cached_.emplace(block->second, pointer);
  cached_bytes_ += block->second;
  in_use_.erase(block);
}

void CudaMemory::release_cached() {
  std::lock_guard lock(mutex_);
  release_cached_locked();
}

void CudaMemory::release_cached_locked() {
  if (cached_.empty()) return;
  // A failure here (a context already broken by an earlier kernel) has been reported by the
  // device that owns the allocator; giving memory back has nothing left to do about it.
  (void)cudaSetDevice(ordinal_);
  for (const auto& [size, pointer] : cached_) {
    (void)cudaFree(pointer);  // waits for queued work that may still use it
    reserved_ -= size;
  }
  cached_.clear();
  cached_bytes_ = 0;
  (void)cudaGetLastError();
}

size_t CudaMemory::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  return reserved_;
}

size_t CudaMemory::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return cached_bytes_;
}

}  // namespace partrain::runner
