// How much of the GPU a traced process records (`--gpu-trace`, docs/tracing-levels.md): each
// level adds to the one before. Chosen by `partrain launch` and `partrain trace`, read by the
// injected process (profiler/inject/) and its CUPTI session from PARTRAIN_GPU_TRACE.
#pragma once

#include <optional>
#include <string_view>

namespace partrain::profiler {

enum class GpuTraceLevel {
  kNccl,     // NCCL's profiler plugin (collectives' GPU spans), NVTX steps, NVML counters
  kKernels,  // + CUPTI's kernel records
  kFull,     // + copies, fills, memory and synchronisation (CUPTI)
};

inline constexpr std::string_view kGpuTraceEnv = "PARTRAIN_GPU_TRACE";

// "nccl", "kernels", "full"; nullopt for anything else.
std::optional<GpuTraceLevel> parse_gpu_trace_level(std::string_view text);
std::string_view gpu_trace_level_name(GpuTraceLevel level);

// The level PARTRAIN_GPU_TRACE asks for; unset (the default, pending measurement:
// docs/decisions.md) or unknown: nullopt, which records as before the levels existed (CUPTI's
// full set, no NCCL plugin).
std::optional<GpuTraceLevel> gpu_trace_level_from_env();

}  // namespace partrain::profiler
