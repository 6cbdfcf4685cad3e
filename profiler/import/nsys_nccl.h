// NCCL as an Nsight Systems report shows it: the NVTX ranges NCCL opens around its API calls
// (domain "NCCL", with payloads: communicator, size, root or peer, reduction) and the
// ncclDevKernel_* kernels those calls launched. From them: which rank each process is (its rank
// in the largest communicator it created), each communicator's members, and the collectives,
// numbered per communicator in issue order (per communicator and peer for send/recv), which is
// how NCCL's ranks agree on them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "profiler/import/collective_clock_alignment.h"
#include "profiler/import/imported_run.h"
#include "profiler/import/nccl_nvtx_payload.h"
#include "profiler/trace_event.h"

namespace partrain::profiler {

// A process of one report: (input file index, nsys process key).
using NsysProcess = std::pair<int, int64_t>;

struct NcclCall {
  int64_t thread = 0;    // globalTid
  std::string function;  // "ncclAllReduce", "ncclGroupEnd", "ncclCommInitRank", ...
  int64_t start_ns = 0;  // on the reference clock
  int64_t end_ns = 0;
  NcclPayload payload;
};

// An NCCL kernel and the runtime call that launched it, both of one process.
struct NcclKernelLaunch {
  int64_t thread = 0;     // the launching call's globalTid
  int64_t launch_ns = 0;  // the launching call's start
  int64_t start_ns = 0;   // the kernel's span
  int64_t end_ns = 0;
  std::string name;  // "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
};

struct NcclProcessTrace {
  std::vector<NcclCall> calls;             // ascending start
  std::vector<NcclKernelLaunch> launches;  // ascending launch
};

struct NcclRankMap {
  std::map<NsysProcess, int> rank_of;
  int world_size = 0;
  bool from_communicators = false;  // false: ranks by file and process order (no payloads)
};

// Ranks from the communicators' creation payloads; without them, processes in file order and
// then process id order are ranks 0, 1, ...
NcclRankMap nccl_ranks(const std::map<NsysProcess, NcclProcessTrace>& processes);

struct NcclCollectives {
  std::map<int, std::vector<CollectiveRecord>> by_rank;  // on the reference clock
  std::vector<CollectiveEnd> ends;
  std::vector<UnmatchedCollectives> unmatched;
};

NcclCollectives nccl_collectives(const std::map<NsysProcess, NcclProcessTrace>& processes,
                                 const NcclRankMap& ranks);

// The element type in an NCCL kernel's name ("..._f32_...", "..._bfloat16"), "" when none.
std::string_view dtype_of_nccl_kernel(std::string_view name);

}  // namespace partrain::profiler
