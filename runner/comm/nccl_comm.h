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

// Rank 0 creates the NCCL unique id and publishes it in the store under id_prefix; the others
// read it. Buffers passed to the returned Comm are device pointers on cuda_device. Operations
// run on a dedicated communication stream; Work::wait() blocks on an event recorded after the
// op and reports NCCL's asynchronous errors. id() == id_prefix.
StatusOr<std::unique_ptr<Comm>> create_nccl_comm(std::shared_ptr<rendezvous::Store> store,
                                                 int rank, int size, int cuda_device,
                                                 std::string id_prefix);

}  // namespace partrain::comm
