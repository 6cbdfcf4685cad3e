// Reading the GPU kernels: whether a trace has any, and one rank's kernel time by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
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

}  // namespace partrain::profiler
