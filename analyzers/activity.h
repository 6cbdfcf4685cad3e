// What a slice's time counts as wherever partrain splits a rank's time (docs/analysis.md):
// `partrain analyze`'s breakdown, its GPU table, the dashboard's last-step split and its timeline
// all take the kind of a slice from here.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>

#include "core/status.h"
#include "profiler/trace_event.h"
#include "profiler/trace_reader/slice_reads.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

enum class Activity : uint8_t {
  kCompute,  // compute slices, and kernels but NCCL's
  kComm,     // collective and p2p slices, and NCCL's kernels
  kMemcpy,   // memcpy and memset slices
  kSync,     // synchronisation: neither busy time nor a container
  kPhase,    // forward, backward, optimizer...: contains the others, and waits between them
  kStep,     // a whole step: contains everything
};

// A kernel of NCCL's, which moves a collective's data on the GPU: HTA 0.5's rule `^nccl.*Kernel`
// (ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclKernel_AllGather_RING_LL_Sum_int8_t). The name
// is all a trace keeps of a kernel that says whose it is, so HTA and partrain agree on it.
bool is_nccl_kernel(std::string_view name);

// By category alone: what a slice counts as when its name does not matter (every kernel is
// compute here; activity_of(category, name) knows NCCL's).
Activity activity_of(profiler::SliceCategory category);
// By category and, for a kernel, its name: an NCCL kernel is communication.
Activity activity_of(profiler::SliceCategory category, std::string_view name);
// The categories whose time the breakdown counts (compute, comm, memcpy and phases).
profiler::SliceCategorySet breakdown_categories();

// Communication the GPU does (an NCCL kernel) runs beside compute kernels, which are still
// work under it; a host's collective call blocks the host's compute slice around it, whose time
// there is waiting (RankBreakdown::compute_only_ns).
inline bool on_gpu(profiler::SliceCategory category) {
  return category == profiler::SliceCategory::kKernel;
}

// activity_of(category, name) for a trace's slices, each kernel name read and judged once: a
// trace has a few hundred kernel names and millions of launches.
class ActivityByName {
 public:
  explicit ActivityByName(const profiler::TraceReader& reader) : reader_(reader) {}
  StatusOr<Activity> of(profiler::SliceCategory category, int64_t name_id);

 private:
  const profiler::TraceReader& reader_;
  std::unordered_map<int64_t, Activity> kernels_;  // name id -> activity
};

}  // namespace partrain::analyzers
