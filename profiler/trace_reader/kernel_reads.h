// Reading the GPU kernels: whether a trace has any, one rank's kernel time by name, and one
// rank's GPU activity (kernels, copies, fills) in order of start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "profiler/trace_event.h"
#include "profiler/trace_reader/row_cursor.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::profiler {

struct KernelTime {
  std::string name;
  int64_t count = 0;     // launches
  int64_t total_ns = 0;  // their summed duration
};

StatusOr<bool> has_kernels(const TraceReader& reader);
// The kernels of `rank` that start in [from, to), one row per name (a GROUP BY: memory grows
// with distinct names, not launches).
StatusOr<std::vector<KernelTime>> kernel_times(const TraceReader& reader, int rank, int64_t from,
                                               int64_t to);

// A kernel, copy or fill on one of the rank's CUDA streams.
struct GpuActivitySlice {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  SliceCategory category = SliceCategory::kKernel;  // kKernel, kMemcpy or kMemset
  std::string name;
};

class GpuActivityCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  bool next(GpuActivitySlice& slice);
};
// The kernel, memcpy and memset slices on the CUDA streams of `rank` that start in [from, to),
// by start (one sorted query: a rank's GPU rows, not its host's).
StatusOr<GpuActivityCursor> gpu_activity(const TraceReader& reader, int rank, int64_t from,
                                         int64_t to);

}  // namespace partrain::profiler
