// A stand-in NCCL and CUDA runtime for the NCCL communicator's tests, as a comm::NcclRuntime:
// ranks are threads of the test, "device memory" is host memory, work runs when it is issued (so
// stream order is issue order and every event is complete once recorded, unless a test holds it
// back), and each collective meets its peers through a table shared by the communicator's ranks.
// Every call is logged per rank with its arguments and handles (streams S1.., events E1..,
// communicators C1..), so a test can check the exact sequence the communicator issues.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "runner/comm/nccl_runtime.h"

namespace partrain::testing {

class StandinNccl {
 public:
  // Function pointers carry no state, so there is one stand-in per process; reset() before each
  // test.
  static StandinNccl& instance();

  const comm::NcclRuntime& runtime() const;
  // Forgets every call, handle and fault; `gpus` devices are visible.
  void reset(int gpus);

  // The calling thread acts as world rank `rank` from now on: its calls go to that rank's log.
  void bind_thread(int rank);
  // Rank `rank`'s calls in order, e.g. "ncclAllReduce(count=1023, float32, sum, C1, S2)".
  std::vector<std::string> calls(int rank) const;
  // A stream made by the runtime, for a test that plays the compute device (logged as "S<n>").
  cudaStream_t create_stream();
  std::string handle_name(const void* handle) const;

  // Faults. `function` is an NCCL or CUDA name ("ncclAllReduce"): its next call by `rank`
  // returns `result` (a ncclResult_t or cudaError_t value) without doing anything.
  void fail_next(int rank, const std::string& function, int result);
  // Events recorded by `rank` from now on never complete, and its communicators report `error`
  // from ncclCommGetAsyncError: a peer lost mid-operation.
  void break_rank(int rank, ncclResult_t error);

  // Device buffers, streams, events and communicators not yet released.
  int live_handles() const;
};

}  // namespace partrain::testing
