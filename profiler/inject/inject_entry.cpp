// libpartrain_inject.so's entry: loaded into every process of a `partrain trace` command (through
// LD_PRELOAD, and CUDA_INJECTION64_PATH for CUDA programs), it makes each rank of a foreign job a
// rank of the trace: who it is (host, pid, local rank, node), how long it lived, and every NCCL
// call it made (nccl_interpose.cpp). A process with a launcher rank (RANK, OMPI_COMM_WORLD_RANK,
// PMI_RANK, SLURM_PROCID) starts tracing at load, unless its parent holds the same rank (a
// shell wrapper's program, a rank's helper); those, and one without, start at their first
// ncclCommInitRank or c10d process group. It never disturbs its host: no collector, no rank, or
// partrain's own workers (which record themselves) mean it stays inert.
#include <optional>

#include "profiler/inject/injected_process.h"

namespace partrain::profiler::inject {
namespace {

__attribute__((constructor)) void partrain_inject_start() { InjectedProcess::start_at_load(); }

}  // namespace
}  // namespace partrain::profiler::inject

// CUDA's injection entry point (CUDA_INJECTION64_PATH): the driver calls it once, from cuInit,
// when the process first uses CUDA. 1 tells the driver the injection succeeded; partrain's
// problems never fail the host program's CUDA.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  partrain::profiler::inject::InjectedProcess::cuda_initialised();
  return 1;
}
