#include "profiler/gpu_trace_level.h"

#include "core/env.h"

namespace partrain::profiler {

std::optional<GpuTraceLevel> parse_gpu_trace_level(std::string_view text) {
  for (GpuTraceLevel level :
       {GpuTraceLevel::kNccl, GpuTraceLevel::kKernels, GpuTraceLevel::kFull}) {
    if (text == gpu_trace_level_name(level)) return level;
  }
  return std::nullopt;
}

std::string_view gpu_trace_level_name(GpuTraceLevel level) {
  switch (level) {
    case GpuTraceLevel::kNccl:
      return "nccl";
    case GpuTraceLevel::kKernels:
      return "kernels";
    case GpuTraceLevel::kFull:
      return "full";
  }
  return "full";
}

std::optional<GpuTraceLevel> gpu_trace_level_from_env() {
  const std::optional<std::string> text = env::get(kGpuTraceEnv);
  if (!text) return std::nullopt;
  return parse_gpu_trace_level(*text);
}

}  // namespace partrain::profiler
