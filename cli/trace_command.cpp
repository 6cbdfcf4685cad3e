// `partrain trace [--trace FILE] -- CMD ...`: profile any command, as `nsys profile` does: a
// collector and one SQLite trace file for everything the command's processes record. Argument
// parsing and messages only; the work is runner/launch/traced_command.
#include <memory>

#include "cli/command.h"
#include "cli/metrics_flags.h"
#include "cli/trace_flags.h"
#include "core/duration.h"
#include "core/log.h"
#include "runner/launch/traced_command.h"

namespace partrain::cli {
namespace {

struct TraceFlags {
  TraceFileFlags trace;
  std::optional<std::string> step_marker;
  std::optional<std::string> collective_timeout;
  std::vector<std::string> command;
  MetricsFlags metrics;
};

int run_trace(const TraceFlags& flags) {
  StatusOr<uint64_t> max_bytes = check_trace_file_flags(TraceFlagsCommand::kTrace, flags.trace);
  if (!max_bytes.is_ok()) {
    log::error("{}", max_bytes.status().message());
    return max_bytes.status().exit_code();
  }
  launch::TracedCommandConfig config;
  config.command = flags.command;
  config.output = flags.trace.file;
  config.command_line = invocation_line();
  config.step_marker = flags.step_marker;
  config.max_bytes = *max_bytes;
  config.nvml_interval = flags.trace.nvml_interval;
  StatusOr<std::optional<std::string>> gpu_trace = gpu_trace_environment(flags.trace);
  if (!gpu_trace.is_ok()) {
    log::error("{}", gpu_trace.status().message());
    return gpu_trace.status().exit_code();
  }
  if (*gpu_trace) config.extra_env.push_back(**gpu_trace);
  if (flags.collective_timeout) {
    StatusOr<Nanoseconds> timeout = parse_duration(*flags.collective_timeout);
    if (!timeout.is_ok() || timeout->count() <= 0) {
      log::error("--collective-timeout must be a positive duration (2s, 5m), got '{}'",
                 *flags.collective_timeout);
      return 2;
    }
    config.collective_timeout = *timeout;
  }
  // Bound before the command starts: a port in use stops it here.
  auto metrics = start_trace_metrics(flags.metrics, config);
  if (!metrics.is_ok()) {
    log::error("{}", metrics.status().message());
    return metrics.status().exit_code();
  }
  auto exit_code = launch::run_traced_command(config);
  if (!exit_code.is_ok()) {
    log::error("{}", exit_code.status().message());
    finish_metrics(metrics->get(), exit_code.status().exit_code());
    return exit_code.status().exit_code();
  }
  finish_metrics(metrics->get(), *exit_code);  // its final page; the exit code stays the run's
  return *exit_code;
}

constexpr const char* kTraceFooter =
    "The command runs with PARTRAIN_COLLECTOR, PARTRAIN_COLLECTOR_TOKEN and PARTRAIN_RUN_ID set, "
    "libpartrain_inject.so in LD_PRELOAD, CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH, and "
    "partrain's Python module first on PYTHONPATH, so every process of it (torchrun, its "
    "workers, a `partrain launch` and its ranks) records into one trace file. A process is a "
    "rank when a launcher gave it one (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID), "
    "when it calls ncclCommInitRank or when it makes a c10d process group. Recorded for "
    "foreign programs: PyTorch's collectives of every process group and its steps "
    "(ProfilerStep#N, else the optimizer's step(); docs/pytorch.md), every NCCL call "
    "(communicator, seq, sizes, peer, group), NVTX ranges "
    "(those matching --step-marker become steps), where CUDA and CUPTI are, GPU kernels, "
    "copies and the GPU time of each NCCL call, and where NVML is, each rank's GPU counters "
    "(docs/tracing.md).\n"
    "With --collective-timeout, a PyTorch rank whose collective stays unfinished that long dumps "
    "its flight recorder (its last collectives with their state) and exits 124; the others, "
    "stopped by their launcher (torchrun), dump theirs; once the command ends, partrain prints "
    "a diagnosis naming the culprit rank and the collective it never entered, and exits 124 "
    "(docs/reliability.md).\n\n"
    "Examples:\n"
    "  partrain trace -- torchrun --nproc-per-node 4 train.py\n"
    "  partrain trace --trace gpt.db -- partrain launch -n 4 --workload gpt --strategy fsdp\n"
    "  partrain export --format chrome gpt.db -o gpt.json   # then open it in ui.perfetto.dev\n\n"
    "Exit codes: the command's own; 128 + N when signal N ended it; 130/143 when interrupted; "
    "124 when it failed after a rank's collective watchdog fired; 2 no command, the trace file "
    "exists, a bad --step-marker, --trace-max-size, --nvml-interval, --gpu-trace or "
    "--collective-timeout; "
    "126 command not executable; 127 command not found.\n"
    "--trace and --trace-max-size are spelled as in `partrain launch`; -o, --output and "
    "--max-size are their earlier names, still accepted.";

}  // namespace

Subcommand add_trace_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "trace", "Run any command under the profiler: one SQLite trace of all its processes");
  auto flags = std::make_shared<TraceFlags>();
  add_trace_file_flags(*cmd, TraceFlagsCommand::kTrace, flags->trace);
  cmd->add_option("--step-marker", flags->step_marker,
                  "NVTX ranges whose name matches this regular expression are the program's "
                  "training steps; the first capture group, if a number, is the step "
                  "(default: 'ProfilerStep#(\\d+)', PyTorch's)");
  cmd->add_option("--collective-timeout", flags->collective_timeout,
                  "PyTorch ranks: a collective unfinished this long fires the rank's watchdog "
                  "(flight-recorder dump, diagnosis, exit 124) (2s, 5m; default: off, torch's "
                  "own timeouts apply)");
  add_metrics_flags(*cmd, flags->metrics);
  cmd->add_option("command", flags->command,
                  "The command and its arguments, after `--` or after trace's own flags (its "
                  "flags after it are its own)");
  cmd->positionals_at_end();  // as launch: the command's flags are never trace's
  cmd->footer(kTraceFooter);
  return {cmd, [flags] { return run_trace(*flags); }};
}

}  // namespace partrain::cli
