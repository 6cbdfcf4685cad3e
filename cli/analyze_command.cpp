// `partrain analyze [DB]`: explains a run from its trace: where each rank's time goes, overlap,
// step times and findings ordered by impact (analyzers/analysis_report.h does the work). Flags,
// finding the most recent trace when none is named, and printing live here.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "analyzers/analysis_report.h"
#include "cli/command.h"
#include "cli/terminal_progress.h"
#include "cli/trace_selection.h"
#include "core/json_dump.h"
#include "core/log.h"
#include "profiler/trace_open.h"

namespace partrain::cli {
namespace {

namespace fs = std::filesystem;


struct AnalyzeFlags {
  std::string trace;
  std::optional<std::string> ranks;  // given empty: refused, not "every rank"
  std::string steps;
  std::optional<int> skip_steps;  // unset: 1, and a trace of a single step keeps it
  bool json = false;
};

StatusOr<analyzers::WindowOptions> window_options(const AnalyzeFlags& flags) {
  analyzers::WindowOptions options;
  options.skip_steps = flags.skip_steps.value_or(1);
  options.skip_is_default = !flags.skip_steps.has_value();
  if (flags.ranks) {
    ASSIGN_OR_RETURN(options.ranks, parse_rank_list(*flags.ranks));
  }
  if (!flags.steps.empty()) {
    ASSIGN_OR_RETURN(const profiler::StepRange range, parse_step_range(flags.steps));
    options.steps = analyzers::StepSelection{range.first, range.last};
  }
  return options;
}


int run_analyze(const AnalyzeFlags& flags) {
  auto options = window_options(flags);
  if (!options.is_ok()) return report_error(options.status());
  fs::path path = flags.trace;
  if (path.empty()) {
    auto found = most_recent_trace(
        "name one (partrain analyze run.db) or record a run first, e.g. partrain launch -n 4 "
        "--workload gpt --dp 2 --tp 2 --steps 6");
    if (!found.is_ok()) return report_error(found.status());
    path = *found;
    log::info("analyzing {} (the most recent trace)", path.string());
  }
  auto trace = profiler::open_trace(path);
  if (!trace.is_ok()) return report_error(trace.status());
  if (trace->writer_alive) {
    log::warn("{} is still being written: analyzing what is committed so far", path.string());
  }
  const profiler::TraceReader reader(trace->db);
  TerminalProgress progress("analyze");  // a big trace takes minutes: say which analysis runs
  progress.update("choosing the window");
  auto window = analyzers::choose_window(reader, *options);
  progress.finish();  // before any message, which would land on the progress line
  if (!window.is_ok()) return report_error(window.status().with_context(path.string()));
  auto report = analyzers::analyze_run(reader, *window,
                                       [&](std::string_view analysis, int number, int count) {
                                         progress.update(analysis, number, count);
                                       });
  progress.finish();
  if (!report.is_ok()) return report_error(report.status().with_context(path.string()));
  for (const auto& [section, done_ns] : report->done_ns) {
    log::debug("analysis section {} done at {:.2f} s", section, static_cast<double>(done_ns) / 1e9);
  }
  if (flags.json) {
    std::cout << dump_json(analyzers::report_json(*report), 2) << '\n';
  } else {
    std::cout << analyzers::format_report(*report);
  }
  std::cout.flush();
  return std::cout ? 0 : 1;
}

constexpr const char* kAnalyzeFooter =
    "Reads a partrain trace and reports, per rank over a window of steps (the first --skip-steps "
    "warm-up steps left out): compute, communication, memcpy and idle time (interval unions of "
    "the slices of each kind, ms per step and % of the window), how much communication overlaps "
    "compute, step time median/p90/mean, then findings ordered by impact, each with its "
    "severity, the evidence in numbers and what to try. A trace without steps (a job run under "
    "`partrain trace`) is analysed as one window from each rank's first to its last event. "
    "Also: collectives per communicator and op (busbw as nccl-tests), stragglers, the pipeline "
    "bubble, memory against the estimate, a mixture-of-experts run's expert load per layer (max / "
    "mean over experts and ep ranks, dropped tokens: docs/analysis-experts.md) and the top "
    "kernels. Definitions and the --json schema: docs/analysis.md.\n"
    "Without DB, the most recently modified *.db in ./partrain-runs is analysed (named on "
    "stderr).\n"
    "Examples:\n"
    "  partrain analyze                              # the latest run in ./partrain-runs\n"
    "  partrain analyze run.db --steps 3:10          # steps 3 to 10 only\n"
    "  partrain analyze run.db --rank 0,2 --skip-steps 2\n"
    "  partrain analyze run.db --json | jq '.ranks[] | {rank, overlap_pct}'\n"
    "Exit codes: 0 analysed; 1 failure; 2 bad --rank/--steps/--skip-steps (ranks or steps the "
    "trace does not have) or no trace to analyse; 3 unreadable trace (not a partrain trace, "
    "newer schema, corrupted).";

}  // namespace

Subcommand add_analyze_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "analyze",
      "Explain a run from its trace: time breakdown, overlap, step times and findings");
  auto flags = std::make_shared<AnalyzeFlags>();
  cmd->add_option("trace", flags->trace,
                  "Trace file (default: the most recent *.db in ./partrain-runs)");
  without_env_var(
      cmd->add_option("--rank,--ranks", flags->ranks, "Only these world ranks, e.g. 0,2 or 0-3,6"));
  without_env_var(
      cmd->add_option("--steps", flags->steps,
                      "Only these training steps (inclusive): A:B, A:, :B or A (wins over "
                      "--skip-steps)"));
  cmd->add_option("--skip-steps", flags->skip_steps,
                  "Warm-up steps left out of the window (default 1; a trace with a single step, "
                  "such as a run that failed early, keeps it)")
      ->check(non_negative_number());
  cmd->add_flag("--json", flags->json, "Print the report as JSON on stdout");
  cmd->footer(kAnalyzeFooter);
  return {cmd, [flags] { return run_analyze(*flags); }};
}

}  // namespace partrain::cli
