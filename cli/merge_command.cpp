// `partrain merge`: joins the per-node trace files of one run (run.db, run.node1.db, ...) into
// one trace file; the work is profiler/trace_merge.h, this file is flags, help and messages.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/log.h"
#include "profiler/trace_merge.h"

namespace partrain::cli {
namespace {

struct MergeFlags {
  std::vector<std::string> inputs;
  std::string output;
  bool force = false;
};

int run_merge(const MergeFlags& flags) {
  std::vector<std::filesystem::path> inputs(flags.inputs.begin(), flags.inputs.end());
  profiler::TraceMergeOptions options;
  options.overwrite = flags.force;
  auto summary = profiler::merge_traces(inputs, flags.output, options);
  if (!summary.is_ok()) {
    log::error("{}", summary.status().message());
    return summary.status().exit_code();
  }
  log::info("merged {} files ({} ranks, {} slices, {} collectives) of run {} into {}",
            summary->files, summary->ranks, summary->slices, summary->collectives,
            summary->run_id.empty() ? "(none)" : summary->run_id, flags.output);
  return 0;
}

}  // namespace

Subcommand add_merge_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "merge", "Join the per-node trace files of one run into one trace file");
  auto flags = std::make_shared<MergeFlags>();
  cmd->add_option("traces", flags->inputs,
                  "Trace files of one run, one per node (node 0's first by convention)")
      ->required()
      ->expected(1, -1);
  cmd->add_option("-o,--output", flags->output,
                  "The merged trace file to create (through a symbolic link, the file it names)")
      ->required();
  cmd->add_flag("--force", flags->force, "Replace the output if it exists");
  cmd->footer(
      "Example (two nodes of run 20240611-1402-ab12):\n"
      "  partrain merge partrain-runs/20240611-1402-ab12.db "
      "partrain-runs/20240611-1402-ab12.node1.db -o all.db\n"
      "  sqlite3 all.db 'SELECT comm_id, seq, count(*) FROM collectives GROUP BY 1, 2 LIMIT 5'\n"
      "Every input must be a trace of the same run, and each rank may appear in one input only; "
      "one input makes a copy. The run's command and config come from node 0's file; its status "
      "is failed if any node failed, else killed, else incomplete, else running, else completed; "
      "stat counts of the same (name, rank) add up. The inputs are only read. The output is "
      "written under a temporary name beside it and renamed when complete (see "
      "docs/trace-format.md, \"Merging node files\").\n"
      "Exit 2 for inputs of different runs, a rank in two inputs, a file given twice or an "
      "existing output without --force, or an output that is a directory, device or FIFO; 3 for an input that is not a readable partrain trace.");
  return {cmd, [flags] { return run_merge(*flags); }};
}

}  // namespace partrain::cli
