// `partrain trace -- CMD ...` as a library call: runs any command under a collector that writes
// one trace file, with the injection environment (LD_PRELOAD, CUDA_INJECTION64_PATH and
// NVTX_INJECTION64_PATH naming libpartrain_inject.so, PARTRAIN_COLLECTOR,
// PARTRAIN_COLLECTOR_TOKEN, PARTRAIN_RUN_ID, PARTRAIN_STEP_MARKER), as nsys profile does. partrain's own workers (a `partrain launch` inside) record through it too.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace partrain::launch {

struct TracedCommandConfig {
  std::vector<std::string> command;
  std::optional<std::string> output;  // unset: ./partrain-runs/<run-id>.db
  std::string command_line;           // for the trace's run row
  std::optional<std::string> step_marker;  // NVTX ranges that are steps (a regex); unset: default
  uint64_t max_bytes = 0;                  // the trace file at most (0: no limit)
  std::optional<std::string> nvml_interval;  // GPU counter sampling period ("0": off); unset: 100ms
};

// Where libpartrain_inject.so is for this partrain binary (<prefix>/lib beside <prefix>/bin), or
// nullopt when it is not there.
std::optional<std::string> injection_library();

// The command's exit code (128 + signal when a signal ended it; 130/143 when partrain trace was
// interrupted). A Status only when it could not start: no command or the output exists (exit 2),
// the trace cannot be created (1), command not found (127).
StatusOr<int> run_traced_command(const TracedCommandConfig& config);

}  // namespace partrain::launch
