// The NCCL communicator: collectives and transfers on device memory, one rank per GPU (NCCL
// refuses two ranks on one device: use Gloo, host-staged, to share a GPU). Built only with CUDA;
// this header names no CUDA or NCCL type so CPU-only code can include it.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "runner/comm/comm.h"
#include "runner/rendezvous/store.h"

namespace partrain::comm {

// Where a rank's NCCL communicator runs and what it orders itself after.
struct NcclCommOptions {
  int cuda_device = 0;  // the GPU the buffers live on (a launched rank's LOCAL_RANK)
  // The stream the rank's compute runs on (a cudaStream_t; nullptr: none). Every operation first
  // makes the communication stream wait on an event recorded there, so a collective reads what
  // the queued compute writes without the host synchronising, and compute queued after the
  // operation runs beside it: DDP's bucket all-reduces overlap the backward on the GPU.
  void* compute_stream = nullptr;
};

// Rank 0 creates the NCCL unique id and publishes it in the store under id_prefix; the others
// read it. Buffers passed to the returned Comm are device pointers on options.cuda_device.
// Operations run on a dedicated communication stream; Work::wait() blocks on an event recorded
// after the op and reports NCCL's asynchronous errors. id() == id_prefix.
StatusOr<std::unique_ptr<Comm>> create_nccl_comm(std::shared_ptr<rendezvous::Store> store,
                                                 int rank, int size, NcclCommOptions options,
                                                 std::string id_prefix);

}  // namespace partrain::comm
