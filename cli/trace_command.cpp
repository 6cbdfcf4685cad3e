// `partrain trace [-o FILE] -- CMD ...`: profile any command, as `nsys profile` does: a collector
// and one SQLite trace file for everything the command's processes record. Argument parsing and
// messages only; the work is runner/launch/traced_command.
#include <memory>

#include "cli/command.h"
#include "core/log.h"
#include "runner/launch/traced_command.h"

namespace partrain::cli {
namespace {

struct TraceFlags {
  std::optional<std::string> output;
  std::optional<std::string> step_marker;
  std::optional<std::string> max_size;
  std::optional<std::string> nvml_interval;
  std::vector<std::string> command;
};

int run_trace(const TraceFlags& flags) {
  if (flags.output && flags.output->empty()) {
    log::error("-o needs a file name (an empty one would trace into nothing)");
    return 2;
  }
  launch::TracedCommandConfig config;
  config.command = flags.command;
  config.output = flags.output;
  config.command_line = invocation_line();
  config.step_marker = flags.step_marker;
  StatusOr<uint64_t> max_bytes = parse_trace_size_limit("--max-size", flags.max_size);
  if (!max_bytes.is_ok()) {
    log::error("{}", max_bytes.status().message());
    return max_bytes.status().exit_code();
  }
  config.max_bytes = *max_bytes;
  config.nvml_interval = flags.nvml_interval;
  auto exit_code = launch::run_traced_command(config);
  if (!exit_code.is_ok()) {
    log::error("{}", exit_code.status().message());
    return exit_code.status().exit_code();
  }
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
    "(docs/tracing.md).\n\n"
    "Examples:\n"
    "  partrain trace -- torchrun --nproc-per-node 4 train.py\n"
    "  partrain trace -o gpt.db -- partrain launch -n 4 --workload gpt --strategy fsdp\n"
    "  partrain export --format chrome gpt.db -o gpt.json   # then open it in ui.perfetto.dev\n\n"
    "Exit codes: the command's own; 128 + N when signal N ended it; 130/143 when interrupted; "
    "2 no command, the output exists, a bad --step-marker, --max-size or --nvml-interval; 126 "
    "command not executable; 127 command not found.";

}  // namespace

Subcommand add_trace_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "trace", "Run any command under the profiler: one SQLite trace of all its processes");
  auto flags = std::make_shared<TraceFlags>();
  cmd->add_option("-o,--output", flags->output,
                  "Trace file to write (default: ./partrain-runs/<run-id>.db); must not exist");
  cmd->add_option("--step-marker", flags->step_marker,
                  "NVTX ranges whose name matches this regular expression are the program's "
                  "training steps; the first capture group, if a number, is the step "
                  "(default: 'ProfilerStep#(\\d+)', PyTorch's)");
  cmd->add_option("--max-size", flags->max_size,
                  "Stop tracing once the trace file would outgrow SIZE (512M, 2G); the command "
                  "goes on, as it does when the disk fills up (default: no limit)");
  cmd->add_option("--nvml-interval", flags->nvml_interval,
                  "How often each rank samples its GPU's utilisation, SM clock, power and "
                  "throttle reasons through NVML, where a driver is installed (default 100ms; "
                  "0 turns it off)");
  cmd->add_option("command", flags->command, "The command and its arguments, after `--`");
  cmd->footer(kTraceFooter);
  return {cmd, [flags] { return run_trace(*flags); }};
}

}  // namespace partrain::cli
