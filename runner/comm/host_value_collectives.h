// Collectives over a few values the host holds (a step's loss, a norm, the summary's figures) on
// a communicator that works on a device's memory: the values go through a small device buffer
// (upload, collective, download), as PyTorch puts a Python number into a CUDA tensor to
// all-reduce it over NCCL. On a host-addressable device the host buffers are used as they are.
#pragma once

#include <cstddef>

#include "core/status.h"
#include "runner/comm/comm.h"
#include "runner/device/device.h"

namespace partrain::comm {

// Called every step, so the device buffer is grown once and reused (no cudaMalloc/cudaFree,
// and no memory events, per step). `device` and `comm` must outlive it.
class HostValueCollectives {
 public:
  HostValueCollectives(runner::Device& device, Comm& comm) : device_(device), comm_(comm) {}

  // In place: `values` (count elements of dtype) becomes the reduction over the group.
  Status all_reduce(void* values, size_t count, DType dtype, ReduceOp op);
  // `recv` receives count x comm.size() elements, rank-major.
  Status all_gather(const void* send, void* recv, size_t count, DType dtype);

 private:
  // At least `bytes` of device memory (category comm: communication staging).
  StatusOr<unsigned char*> staging(size_t bytes);

  runner::Device& device_;
  Comm& comm_;
  runner::TrackedBuffer staging_;
};

}  // namespace partrain::comm
