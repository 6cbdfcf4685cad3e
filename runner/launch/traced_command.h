// `partrain trace -- CMD ...` as a library call: runs any command under a collector that writes
// one trace file, with the injection environment (LD_PRELOAD, CUDA_INJECTION64_PATH and
// NVTX_INJECTION64_PATH naming libpartrain_inject.so, PYTHONPATH leading to partrain's Python
// module, PARTRAIN_COLLECTOR, PARTRAIN_COLLECTOR_TOKEN, PARTRAIN_RUN_ID, PARTRAIN_STEP_MARKER),
// as nsys profile does. partrain's own workers (a `partrain launch` inside) record through it
// too, and `partrain launch` gives a command's workers the same injection.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/duration.h"
#include "core/status.h"

namespace partrain::launch {

struct TracedCommandConfig {
  std::vector<std::string> command;
  std::optional<std::string> output;  // unset: ./partrain-runs/<run-id>.db
  std::optional<std::string> run_id;  // unset: $PARTRAIN_RUN_ID, else a new one
  std::string command_line;           // for the trace's run row
  std::optional<std::string> step_marker;  // NVTX ranges that are steps (a regex); unset: default
  uint64_t max_bytes = 0;                  // the trace file at most (0: no limit)
  std::optional<std::string> nvml_interval;  // GPU counter sampling period ("0": off); unset: 100ms
  // The ranks' collective watchdog (PyTorch ranks, through the injection library); unset: none.
  std::optional<Nanoseconds> collective_timeout;
  // More variables for the command ("PARTRAIN_GPU_TRACE=nccl": --gpu-trace), replacing any of
  // the same name it would inherit.
  std::vector<std::string> extra_env;
};

// Where libpartrain_inject.so is for this partrain binary (<prefix>/lib beside <prefix>/bin), or
// nullopt when it is not there.
std::optional<std::string> injection_library();
// Where partrain's Python module is (<share>/python, holding the sitecustomize.py that records
// PyTorch jobs: docs/pytorch.md), or nullopt when it is not there.
std::optional<std::string> python_module_dir();

// What makes a command's processes record themselves, found once (each missing part is said
// once, as a warning).
struct InjectionPaths {
  std::optional<std::string> library;        // injection_library()
  std::optional<std::string> python_module;  // python_module_dir()
};
InjectionPaths find_injection();

// Makes the processes of a command started with `env` ("NAME=value" entries) record themselves
// into the collector it names: libpartrain_inject.so in LD_PRELOAD (before the user's),
// CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH (unless the user set their own NVTX tool),
// NCCL_PROFILER_PLUGIN when a --gpu-trace level is in `env` (unless the user set their own),
// partrain's Python module first on PYTHONPATH, and PARTRAIN_TRACER_PID (this process, the
// command's parent).
void add_injection_environment(std::vector<std::string>& env, const InjectionPaths& paths);

// The command's exit code (128 + signal when a signal ended it; 130/143 when partrain trace was
// interrupted; 124 when it failed after a rank's collective watchdog fired: the ranks' flight-
// recorder dumps, left in a directory of this run's, are then diagnosed on stderr and in the
// trace, as `partrain launch` does). A Status only when it could not start: no command or the output exists (exit 2),
// the trace cannot be created (1), command not found (127).
StatusOr<int> run_traced_command(const TracedCommandConfig& config);

}  // namespace partrain::launch
