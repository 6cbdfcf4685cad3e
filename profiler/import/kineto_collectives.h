// The collectives of an imported Kineto trace, from what each rank's file shows of them:
// record_param_comms (NCCL, and any backend that calls RECORD_PARAM_COMMS: op, dtype, sizes,
// group name and sequence number), or else c10d's dispatcher ops (`c10d::allreduce_`: tensors
// only) paired with the gloo worker's annotation of the transfer (`gloo:all_reduce`: its dtype
// and when it finished), their groups inferred (group_inference.h). Out come partrain's
// collective records, keyed (comm_id, seq) across ranks, still on each file's own clock.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "profiler/import/collective_clock_alignment.h"
#include "profiler/import/imported_run.h"
#include "profiler/import/kineto_json.h"
#include "profiler/trace_event.h"

namespace partrain::profiler {

// A `c10d::*` op on the calling thread: the host side of a collective (issue only: it returns
// once the work is queued, the wait is not recorded).
struct C10dCall {
  std::string_view op;
  // Elements of the tensors gloo's annotation shows (this rank's buffer; an all_to_all's whole
  // input): what pairs the op with its transfer and what every member has alike.
  uint64_t count = 0;
  // Its input and output tensors' elements as a live run's hooks see them (TorchOp): what the
  // trace's count and bytes are made from (torch_collective_size). A reduce-scatter's input is
  // group size x count: ProcessGroupGloo runs `_reduce_scatter_base` as an all-reduce of a copy
  // of the whole input. 0 where Kineto does not record them (a list of lists of tensors).
  uint64_t input_elements = 0;
  uint64_t output_elements = 0;
  std::string_view dtype;  // empty when its tensors are a list (the annotation says)
  int group_peer = -1;     // root of a rooted op, peer of send/recv: a rank of the group
  std::string thread;      // kineto_thread_key: where the kernels it launched were launched from
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// A `gloo:*` annotation on a gloo worker thread: the transfer itself.
struct GlooTransfer {
  std::string_view op;
  uint64_t count = 0;
  // A barrier's, and a scatter's on a rank other than its root, show no tensor: such a
  // transfer pairs by its op alone.
  bool has_tensors = false;
  std::string_view dtype;
  int64_t thread = -1;  // the worker thread's id
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// A record_param_comms op: c10d's own description of a collective.
struct CommsRecord {
  std::string_view op;
  std::string_view dtype;
  uint32_t dtype_bytes = 0;
  uint64_t in_elements = 0;
  uint64_t out_elements = 0;
  int group_size = 0;
  std::string group_name;
  std::string group_ranks;  // "[0, 1]" as written (may be cut short: "[0, ..., 7]")
  int group_rank = -1;      // "Rank": this process within the group
  int peer = -1;            // send/recv: "Dst Rank"/"Src Rank"
  std::optional<uint64_t> seq;
  int64_t external_id = -1;
  std::string thread;  // kineto_thread_key
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// An NCCL kernel: its device-side span, and whatever ties it to its record_param_comms or c10d
// op: the group and sequence number (newer Kineto), the op's External id, or else the host
// thread and time of its launch (the cudaLaunchKernel* event of the kernel's correlation id,
// which c10d calls inside the op: how older Kineto traces tie them, and HTA's rule).
struct NcclKernelSpan {
  std::string group_name;
  std::optional<uint64_t> seq;
  int64_t external_id = -1;
  int64_t correlation = -1;
  std::string launch_thread;  // kineto_thread_key; empty: its launch is not in the trace
  int64_t launch_ns = -1;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// A host runtime event with a correlation id (cudaLaunchKernel, cudaLaunchKernelExC,
// cuLaunchKernel, hipLaunchKernel, ...): read only to place the launch of an NCCL kernel.
struct KernelLaunch {
  int64_t correlation = -1;
  std::string thread;  // kineto_thread_key
  int64_t ts_ns = 0;
};

struct RankCollectiveEvidence {
  // The groups this rank belongs to, in the order its distributedInfo.pg_config lists them
  // (the order c10d created them in).
  std::vector<std::string> own_groups;
  std::vector<C10dCall> c10d_calls;
  std::vector<GlooTransfer> gloo_transfers;
  std::vector<CommsRecord> comms_records;
  std::vector<NcclKernelSpan> nccl_kernels;
  // The rank ran GPU kernels: a collective whose kernel the trace does not show has only its
  // host enqueue span, which is no measure of the transfer.
  bool gpu_rank = false;
};

// Gives each kernel the thread and time of its launch, from the launches of the same rank.
void place_launches(std::vector<NcclKernelSpan>& kernels,
                    const std::vector<KernelLaunch>& launches);
// Reading a launch out of a cuda_runtime / cuda_driver event (nullopt: no correlation id).
std::optional<KernelLaunch> kernel_launch_of(const KinetoEvent& event);

// Reading the evidence out of an event's args (nullopt: not one of those events).
std::optional<C10dCall> c10d_call_of(const KinetoEvent& event);
std::optional<GlooTransfer> gloo_transfer_of(const KinetoEvent& event);
std::optional<CommsRecord> comms_record_of(const KinetoEvent& event);
std::optional<NcclKernelSpan> nccl_kernel_of(const KinetoEvent& event);

struct ImportedCollectives {
  std::map<int, std::vector<CollectiveRecord>> by_rank;  // times on each file's own clock
  std::vector<CollectiveEnd> ends;                       // for clock alignment
  std::vector<UnmatchedCollectives> unmatched;
  // Per GPU rank: collectives whose kernel is not in the trace (recorded as enqueued: no time).
  std::map<int, int64_t> without_kernel;
};

ImportedCollectives assemble_collectives(const std::vector<ProcessGroupConfig>& groups,
                                         std::map<int, RankCollectiveEvidence> evidence);

}  // namespace partrain::profiler
