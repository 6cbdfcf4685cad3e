// The job's PMIx server (Open MPI's mpirun and orted, PRRTE, Slurm's --mpi=pmix), asked what the
// process environment does not say: which host a rank runs on. libpmix.so.2 is loaded with
// dlopen, never linked, so partrain builds and runs without it; only a multi-node Open MPI run
// given no --master-addr needs it.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace partrain::launch {

// The host name PMIx gives for `rank` of this process's namespace (PMIX_HOSTNAME): connects
// (PMIx_Init), asks, and disconnects (PMIx_Finalize, which the MPI runtime expects of a process
// that connected). kUnavailable when this process has no PMIx server (PMIX_NAMESPACE unset) or
// libpmix.so.2 is missing, naming the package; kFailed naming PMIx's error otherwise.
StatusOr<std::string> pmix_host_of_rank(uint32_t rank);

}  // namespace partrain::launch
