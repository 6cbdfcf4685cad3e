// The second pass of an Nsight Systems import: one report's rows of the ranks' processes
// (kernels, copies, fills, syncs, runtime calls, NVTX ranges) as partrain events on the
// timeline, written in batches.
#pragma once

#include <cstdint>
#include <map>

#include "core/status.h"
#include "profiler/import/imported_run.h"
#include "profiler/import/nsys_export.h"
#include "profiler/import/nsys_nccl.h"
#include "profiler/trace_writer.h"

namespace partrain::profiler {

struct NsysRowCounts {
  int64_t events = 0;
  int64_t last_ns = INT64_MIN;  // the latest end on the timeline
  std::map<int, int64_t> per_rank;
  int64_t reversed = 0;  // rows whose end precedes their start, kept 0 long
};

// `index`: the report's place among the inputs (NsysProcess keys); `shift_ns` moves its session
// clock onto the reference report's; rows of processes that are no rank are left out.
StatusOr<NsysRowCounts> write_nsys_rows(TraceWriter& writer, const NsysExport& file,
                                        int64_t shift_ns, int index,
                                        const std::map<NsysProcess, const ImportedRank*>& ranks);

}  // namespace partrain::profiler
