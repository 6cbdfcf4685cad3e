#include "cli/trace_flags.h"

#include <fmt/format.h>

#include "core/byte_size.h"
#include "core/env.h"
#include "core/log.h"
#include "profiler/gpu_trace_level.h"
#include "runner/launch/trace_path.h"

namespace partrain::cli {

void add_trace_file_flags(CLI::App& command, TraceFlagsCommand of, TraceFileFlags& flags) {
  const bool launch = of == TraceFlagsCommand::kLaunch;
  command.add_option(launch ? "--trace" : "-o,--trace,--output", flags.file,
                     launch
                         ? "Trace file of the run (default: ./partrain-runs/<run-id>.db); "
                           "must not exist; with several nodes node 0 writes FILE and node N > 0 "
                           "FILE with .nodeN before its extension (run.db, run.node1.db: "
                           "partrain merge joins them)"
                         : "Trace file to write (default: ./partrain-runs/<run-id>.db); "
                           "must not exist");
  command.add_option(launch ? "--trace-max-size" : "--trace-max-size,--max-size", flags.max_size,
                     launch ? "Stop tracing once a node's trace file would outgrow SIZE (512M, "
                              "2G); the run goes on, as it does when the disk fills up (default: "
                              "no limit)"
                            : "Stop tracing once the trace file would outgrow SIZE (512M, 2G); "
                              "the command goes on, as it does when the disk fills up (default: "
                              "no limit)");
  command.add_option("--nvml-interval", flags.nvml_interval,
                     "On a GPU with a driver: how often each rank samples its GPU's utilisation, "
                     "SM clock, power and throttle reasons into the trace through NVML (100ms, "
                     "1s; 0: off; default: 100ms)");
  command.add_option("--gpu-trace", flags.gpu_trace,
                     "How much of the GPU a command's ranks (PyTorch, any NCCL program; built-in "
                     "workloads record as before) record: nccl (NCCL's profiler plugin: each "
                     "collective's GPU span, algorithm, protocol and channels; NVTX steps; NVML "
                     "counters), kernels (+ CUPTI's kernel records), full (+ copies, memory and "
                     "synchronisation). Default: as without this flag, CUPTI's full set without "
                     "the plugin, until measurements choose (docs/tracing-levels.md)");
}

std::string_view trace_file_flag(TraceFlagsCommand of) {
  return of == TraceFlagsCommand::kLaunch ? "--trace" : "--trace/-o";
}

std::string_view trace_max_size_flag(TraceFlagsCommand of) {
  return of == TraceFlagsCommand::kLaunch ? "--trace-max-size" : "--trace-max-size/--max-size";
}

StatusOr<uint64_t> check_trace_file_flags(TraceFlagsCommand of, const TraceFileFlags& flags) {
  RETURN_IF_ERROR(launch::check_trace_file(flags.file, trace_file_flag(of)));
  return parse_trace_size_limit(trace_max_size_flag(of), flags.max_size);
}

StatusOr<std::optional<std::string>> gpu_trace_environment(const TraceFileFlags& flags) {
  if (!flags.gpu_trace) return std::optional<std::string>();
  const std::optional<profiler::GpuTraceLevel> level =
      profiler::parse_gpu_trace_level(*flags.gpu_trace);
  if (!level) {
    return invalid_argument(
        "--gpu-trace {}: no such level; give nccl, kernels or full "
        "(docs/tracing-levels.md)",
        *flags.gpu_trace);
  }
  const bool light = *level == profiler::GpuTraceLevel::kNccl;
  const std::optional<std::string> plugin = env::get("NCCL_PROFILER_PLUGIN");
  if (plugin && !plugin->empty()) {
    log::warn(
        "NCCL_PROFILER_PLUGIN is set ({}): NCCL has one profiler-plugin slot, so "
        "partrain's is not loaded and collectives keep the interposition's host times{}",
        *plugin,
        light ? " (no GPU time at --gpu-trace nccl)"
              : " and the GPU time of their CUPTI kernel records");
  }
  const std::optional<std::string> nvtx = env::get("NVTX_INJECTION64_PATH");
  if (nvtx && !nvtx->empty()) {
    log::warn(
        "NVTX_INJECTION64_PATH is set ({}): NVTX ranges go to that tool, not partrain, so "
        "steps come from partrain's PyTorch module (ProfilerStep#N, the optimizer's "
        "step) where it runs, and the trace has no NVTX ranges",
        *nvtx);
  }
  return std::optional<std::string>(
      fmt::format("{}={}", profiler::kGpuTraceEnv, profiler::gpu_trace_level_name(*level)));
}

StatusOr<uint64_t> parse_trace_size_limit(std::string_view flag,
                                          const std::optional<std::string>& text) {
  if (!text) return uint64_t{0};
  constexpr uint64_t kSmallest = 1 << 20;
  StatusOr<uint64_t> bytes = parse_byte_size(*text);
  if (!bytes.is_ok()) {
    return invalid_argument("{} {}: {}; give a size such as 512M or 2G", flag, *text,
                            bytes.status().message());
  }
  if (*bytes < kSmallest) {
    return invalid_argument("{} {}: a trace needs at least 1M (1048576 bytes); give a larger size",
                            flag, *text);
  }
  return *bytes;
}

}  // namespace partrain::cli
