// The flags that say where a run's trace goes, how large it may grow, how often the GPUs'
// counters are sampled into it and how much of the GPU is recorded, spelled alike in `partrain
// launch` and `partrain trace`: --trace FILE, --trace-max-size SIZE, --nvml-interval,
// --gpu-trace LEVEL. `trace` keeps the spellings it had before as
// aliases, listed beside the names in its --help: -o and --output, --max-size.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace partrain::cli {

struct TraceFileFlags {
  std::optional<std::string> file;
  std::optional<std::string> max_size;
  std::optional<std::string> nvml_interval;
  std::optional<std::string> gpu_trace;  // nccl, kernels, full (docs/tracing-levels.md)
};

// Which command has them: `trace` adds its earlier spellings as aliases, and messages name them.
enum class TraceFlagsCommand { kLaunch, kTrace };

void add_trace_file_flags(CLI::App& command, TraceFlagsCommand of, TraceFileFlags& flags);

// The spellings of --trace and --trace-max-size in `of`'s messages: "--trace" for launch,
// "--trace/-o" for trace (the one a user of -o will look for last).
std::string_view trace_file_flag(TraceFlagsCommand of);
std::string_view trace_max_size_flag(TraceFlagsCommand of);

// --trace's name checked and --trace-max-size read (0: no limit), before anything runs;
// kInvalidArgument names the flag as `of` spells it.
StatusOr<uint64_t> check_trace_file_flags(TraceFlagsCommand of, const TraceFileFlags& flags);

// --gpu-trace as the ranks' environment entry ("PARTRAIN_GPU_TRACE=nccl"), nullopt when not
// given (the default: recording as before the levels, pending measurement); kInvalidArgument
// for an unknown level. Says once, as a warning, what a level falls back to where another tool
// holds NCCL's one profiler-plugin slot (NCCL_PROFILER_PLUGIN) or the NVTX injection.
StatusOr<std::optional<std::string>> gpu_trace_environment(const TraceFileFlags& flags);

// A trace size limit as typed after `flag` ("512M", "2G"): 0 when not given; kInvalidArgument
// for text that is no size or a size under 1 MiB (less than an empty trace with its reserve).
StatusOr<uint64_t> parse_trace_size_limit(std::string_view flag,
                                          const std::optional<std::string>& text);

}  // namespace partrain::cli
