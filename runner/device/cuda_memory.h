// GPU memory for the tracked allocator: blocks from cudaMalloc on one device, kept for reuse when
// freed, so a CUDA device's buffers are counted per category exactly as the CPU device's are
// (tracked_allocator.h: categories count the bytes asked for, whatever block holds them).
//
// Why a cache: cudaFree waits for the whole device, and the workloads free activations, grads
// and workspace many times a step; a free that waits keeps the host from running ahead of the
// GPU, so every launch's host time becomes GPU idle time (measured on an H100: the gpt workload
// at hidden 4096 spent 69% of its step outside GEMMs with cudaFree per buffer, docs/gpu-validation.md).
//
// Reuse is ordered by the compute stream, as PyTorch's caching allocator does it: a block freed
// while queued kernels may still read it can be handed out at once, since the next op on it is
// queued behind them on the same stream. Work on another stream (a communicator's) is ordered
// after the compute stream when it is issued (nccl_comm_nccl.cpp) and is waited for through its
// Work before the buffers it uses are freed (the contract of comm::Work, which the workloads keep:
// a pipeline keeps each send's tensor until the send's wait).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runner/device/tracked_allocator.h"

namespace partrain::runner {

class CudaMemory final : public RawMemory {
 public:
  // Blocks are rounded up to a multiple of this below kLargeBlock bytes...
  static constexpr size_t kSmallGranule = 512;
  // ...and to a multiple of it from there on (cudaMalloc's own granularity for large blocks).
  static constexpr size_t kLargeBlock = size_t{2} << 20;

  explicit CudaMemory(int ordinal) : ordinal_(ordinal) {}
  ~CudaMemory() override;  // every cached block back to the GPU (cudaFree)
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  std::string name() const override { return "cuda:" + std::to_string(ordinal_); }
  // A cached block of the same rounded size, else a new one from cudaMalloc; when cudaMalloc
  // refuses, the cache is given back to the GPU and cudaMalloc asked once more. nullptr when it
  // still refuses (out of memory, or a broken context): the allocator turns that into a Status
  // naming the category and size. The CUDA error is cleared so that it is not taken for a later
  // kernel's.
  void* allocate(size_t bytes) override;
  // Keeps the block for reuse; nothing waits.
  void free(void* pointer, size_t bytes) override;

  // Every cached block back to the GPU (cudaFree, which waits for the device).
  void release_cached();
  // Bytes held from the GPU: blocks in use plus cached ones.
  size_t reserved_bytes() const;
  size_t cached_bytes() const;

  static size_t block_bytes(size_t bytes);

 private:
  void release_cached_locked();

  int ordinal_;
  mutable std::mutex mutex_;  // a rank's thread allocates; a communicator's may free
  std::multimap<size_t, void*> cached_;         // free blocks by size
  std::unordered_map<void*, size_t> in_use_;    // the block size of each pointer handed out
  size_t reserved_ = 0;
  size_t cached_bytes_ = 0;
};

}  // namespace partrain::runner
