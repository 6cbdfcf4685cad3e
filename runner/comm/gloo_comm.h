// The Gloo communicator: collectives and point-to-point transfers on host memory over TCP,
// bootstrapped through the rendezvous Store. Collectives run in issue order on one worker
// thread per communicator (as PyTorch's ProcessGroupGloo), so async ops overlap the caller.
#pragma once

#include <memory>
#include <string>

#include "core/duration.h"
#include "core/status.h"
#include "runner/comm/comm.h"
#include "runner/rendezvous/store.h"

namespace partrain::comm {

struct GlooOptions {
  std::string hostname = "127.0.0.1";  // address other ranks reach this rank on
  // Bootstrap and per-operation deadline; an op past it fails with kTimeout and leaves the
  // communicator unusable (Gloo poisons the context), as NCCL's watchdog would abort it.
  Nanoseconds timeout = std::chrono::seconds(300);
  // The world communicator's id(); store keys are derived from it, so it must be unique among
  // the communicators bootstrapped through one store.
  std::string id_prefix = "world";
};

// Every rank of [0, size) calls this with the same store, size and options.id_prefix.
StatusOr<std::unique_ptr<Comm>> create_gloo_comm(std::shared_ptr<rendezvous::Store> store,
                                                 int rank, int size, GlooOptions options);

}  // namespace partrain::comm
