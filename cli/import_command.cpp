// `partrain import`: traces users already have, one file per rank — PyTorch profiler (Kineto)
// JSON, or Nsight Systems reports exported to SQLite — into one partrain trace, which analyze,
// top, export and merge then read. Flags, the choice of importer and the summary live here; the
// work is profiler/import/.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/terminal_progress.h"
#include "core/duration.h"
#include "core/log.h"
#include "core/number_format.h"
#include "core/rank_list.h"
#include "profiler/chrome_export.h"
#include "profiler/import/kineto_import.h"
#include "profiler/import/nsys_import.h"

namespace partrain::cli {
namespace {

namespace fs = std::filesystem;

struct ImportFlags {
  std::vector<std::string> inputs;
  std::string output;
  std::string step_marker;
  std::string cycle;  // "N" or "last"; empty: not given
  bool force = false;
};

bool is_trace_file_name(const fs::path& path) {
  return profiler::has_kineto_file_name(path) || path.extension() == ".sqlite";
}

// A directory without trace files of its own, whose subdirectories hold some (one per run or
// per cycle, as some handlers are pointed): import does not look into them, so say where they
// are.
Status no_trace_file_in(const std::string& dir) {
  std::vector<std::string> holding;
  std::error_code error;
  for (const auto& sub : fs::directory_iterator(dir, error)) {
    if (!sub.is_directory(error)) continue;
    for (const auto& entry : fs::directory_iterator(sub.path(), error)) {
      if (entry.is_regular_file(error) && is_trace_file_name(entry.path())) {
        holding.push_back(sub.path().filename().string());
        break;
      }
    }
  }
  if (holding.empty()) {
    return make_status(StatusCode::kUnreadable,
                       "{}: a directory with no trace file in it (*.json, *.json.gz, *.sqlite)",
                       dir);
  }
  std::sort(holding.begin(), holding.end());
  return make_status(StatusCode::kUnreadable,
                     "{}: no trace file in it, but its subdirectory{} {} hold{} some: import "
                     "reads a directory's own files, not its subdirectories'; give one "
                     "(partrain import {}) or the files ({}/*/*.json.gz)",
                     dir, holding.size() == 1 ? "" : "s", fmt::join(holding, ", "),
                     holding.size() == 1 ? "s" : "", (fs::path(dir) / holding.front()).string(),
                     fs::path(dir).string());
}

// A directory stands for the traces in it (as HTA's TraceAnalysis(trace_dir=...) takes one):
// its *.json, *.json.gz and *.sqlite files, in name order. The JSON torch writes beside its
// Kineto traces (execution traces, memory timelines) is passed over, said in `notes`; a file
// named on the command line is the user's choice, and the import says what it is.
StatusOr<std::vector<fs::path>> expand_inputs(const std::vector<std::string>& given,
                                              std::vector<std::string>& notes) {
  std::vector<fs::path> inputs;
  for (const std::string& text : given) {
    const fs::path path(text);
    std::error_code error;
    if (!fs::is_directory(path, error)) {
      inputs.push_back(path);
      continue;
    }
    std::vector<fs::path> found;
    std::vector<std::string> passed_over;
    for (const auto& entry : fs::directory_iterator(path, error)) {
      const fs::path& p = entry.path();
      if (!entry.is_regular_file() || !is_trace_file_name(p)) continue;
      const std::string_view other =
          profiler::has_kineto_file_name(p) ? profiler::other_torch_json_of(p) : std::string_view();
      if (other.empty()) {
        found.push_back(p);
      } else {
        passed_over.push_back(fmt::format("{} ({})", p.filename().string(), other));
      }
    }
    std::sort(passed_over.begin(), passed_over.end());
    if (found.empty() && passed_over.empty()) return no_trace_file_in(text);
    if (found.empty()) {
      return make_status(StatusCode::kUnreadable,
                         "{}: no Kineto trace in it, only JSON torch writes beside them: {}", text,
                         fmt::join(passed_over, ", "));
    }
    if (!passed_over.empty()) {
      notes.push_back(fmt::format("{}: passing over {}: not Kineto traces", text,
                                  fmt::join(passed_over, ", ")));
    }
    std::sort(found.begin(), found.end());
    inputs.insert(inputs.end(), found.begin(), found.end());
  }
  return inputs;
}

// Each path once: a directory or file named twice (or a file both named and in a directory
// named) would read as a second profiler cycle of each of its ranks.
Status check_given_once(const std::vector<fs::path>& paths) {
  std::map<fs::path, const fs::path*> seen;  // resolved -> as given
  for (const fs::path& path : paths) {
    std::error_code error;
    fs::path resolved = fs::weakly_canonical(path, error);
    if (error) resolved = path;
    auto [it, inserted] = seen.emplace(resolved, &path);
    if (inserted) continue;
    if (*it->second == path) {
      return invalid_argument("{} is given twice: give each rank's trace once", path.string());
    }
    return invalid_argument("{} and {} are the same file: give each rank's trace once",
                            it->second->string(), path.string());
  }
  return Status::ok();
}

int run_import(const ImportFlags& flags) {
  const std::vector<fs::path> given(flags.inputs.begin(), flags.inputs.end());
  if (Status once = check_given_once(given); !once.is_ok()) return report_error(once);
  std::vector<std::string> notes;
  auto inputs = expand_inputs(flags.inputs, notes);
  if (!inputs.is_ok()) return report_error(inputs.status());
  if (Status once = check_given_once(*inputs); !once.is_ok()) return report_error(once);
  for (const std::string& note : notes) log::info("{}", note);
  size_t sqlite_files = 0;
  for (const fs::path& p : *inputs) sqlite_files += profiler::is_sqlite_file(p) ? 1 : 0;
  if (sqlite_files != 0 && sqlite_files != inputs->size()) {
    return report_error(invalid_argument(
        "the inputs mix Nsight Systems SQLite exports and Kineto JSON traces: import one kind "
        "at a time"));
  }
  // --force replaces the output: never one of the traces it is made from (followed through
  // links, as the output is written).
  for (const fs::path& input : *inputs) {
    std::error_code ec;
    if (fs::equivalent(input, flags.output, ec)) {
      return report_error(
          invalid_argument("the output {} is also an input ({}): name a new file with -o",
                           flags.output, input.string()));
    }
  }
  profiler::TraceImportOptions options;
  options.inputs = std::move(inputs).value();
  options.output = flags.output;
  options.overwrite = flags.force;
  options.step_marker = flags.step_marker;
  if (!flags.cycle.empty()) {
    if (flags.cycle == "last") {
      options.cycle = profiler::TraceImportOptions::kLastCycle;
    } else {
      int cycle = 0;
      const char* end = flags.cycle.data() + flags.cycle.size();
      const auto [at, error] = std::from_chars(flags.cycle.data(), end, cycle);
      if (error != std::errc() || at != end || cycle < 1) {
        return report_error(invalid_argument(
            "--cycle {}: give a cycle number from 1 (each rank's files in time order) or "
            "'last'",
            flags.cycle));
      }
      options.cycle = cycle;
    }
  }
  options.command_line = invocation_line();
  const bool nsys = sqlite_files != 0;
  TerminalProgress progress("import");  // gigabytes of traces take minutes
  options.progress = [&](std::string_view what, int number, int count) {
    progress.update(what, number, count);
  };
  auto summary =
      nsys ? profiler::import_nsys_reports(options) : profiler::import_kineto_traces(options);
  progress.finish();
  if (!summary.is_ok()) return report_error(summary.status());
  for (const std::string& warning : summary->warnings) log::warn("{}", warning);
  std::vector<int> ranks;
  for (const auto& r : summary->ranks) ranks.push_back(r.rank);
  std::sort(ranks.begin(), ranks.end());
  // a Kineto file per rank imported (one cycle's of several); a report may hold several ranks
  const size_t files = nsys ? options.inputs.size() : summary->ranks.size();
  log::info(
      "imported {} {}{} ({} {} of a world of {}; {} events, {} collectives{}) into {} as run {}",
      files, nsys ? "Nsight Systems report" : "Kineto trace", files == 1 ? "" : "s",
      ranks.size() == 1 ? "rank" : "ranks", format_rank_list(ranks), summary->world_size,
      summary->events, summary->collectives,
      summary->unmatched_collectives > 0
          ? fmt::format(", {} unmatched", summary->unmatched_collectives)
          : std::string(),
      flags.output, summary->run_id);
  // One line per host and clock: the ranks of a host share its clock, and 1,024 ranks' lines
  // one by one buried the summary.
  std::vector<std::pair<std::string, std::vector<int>>> clocks;  // "(host): clock ..." -> ranks
  for (const auto& r : summary->ranks) {
    if (r.clock.estimates == 0 && r.clock.aligned) continue;
    std::string line = fmt::format(
        "({}): clock {}", r.host.empty() ? "host unknown" : r.host,
        r.clock.aligned
            ? fmt::format("{}{} ms from the reference host's, +/- {} ({} collectives)",
                          r.clock.offset_ns > 0 ? "+" : "",
                          format_decimal(static_cast<double>(r.clock.offset_ns) / 1e6, 3),
                          format_duration(Nanoseconds(r.clock.uncertainty_ns)), r.clock.estimates)
            : std::string("not aligned"));
    auto same = std::find_if(clocks.begin(), clocks.end(),
                             [&line](const auto& c) { return c.first == line; });
    if (same == clocks.end())
      clocks.emplace_back(std::move(line), std::vector<int>{r.rank});
    else
      same->second.push_back(r.rank);
  }
  for (auto& [line, clock_ranks] : clocks) {
    std::sort(clock_ranks.begin(), clock_ranks.end());
    log::info("  {} {} {}", clock_ranks.size() == 1 ? "rank" : "ranks",
              format_rank_list(clock_ranks), line);
  }
  return 0;
}

}  // namespace

Subcommand add_import_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "import", "Turn PyTorch profiler (Kineto) or Nsight Systems traces into a partrain trace");
  auto flags = std::make_shared<ImportFlags>();
  cmd->add_option("traces", flags->inputs,
                  "One file per rank: Kineto JSON (.json, .json.gz) as torch.profiler writes it, "
                  "or `nsys export --type sqlite` files (.sqlite); a directory stands for the "
                  "trace files in it (not its subdirectories'; torch's execution traces and "
                  "memory timelines there are passed over); each path once")
      ->required()
      ->expected(1, -1);
  cmd->add_option("-o,--output", flags->output, "The partrain trace file to create")->required();
  cmd->add_flag("--force", flags->force, "Replace the output if it exists");
  cmd->add_option("--cycle", flags->cycle,
                  "Which profiler cycle to import when there are several files per rank (a "
                  "torch.profiler schedule with repeat writes one per cycle): N, from 1 in each "
                  "rank's time order, or 'last'");
  cmd->add_option("--step-marker", flags->step_marker,
                  "Regular expression naming the ranges that are training steps (Kineto user "
                  "annotations, NVTX ranges); the first capture group, when a number, is the "
                  "step (default: ProfilerStep#(\\d+), what torch.profiler's step() records)");
  cmd->footer(
      "Examples:\n"
      "  partrain import ./log/ -o run.db            (tensorboard_trace_handler's directory)\n"
      "  partrain import rank0.pt.trace.json.gz rank1.pt.trace.json.gz -o run.db\n"
      "  partrain import ./log/ --cycle last -o run.db  (schedule(..., repeat=3): 3 files a rank)\n"
      "  partrain import report.sqlite -o run.db --step-marker 'train_step'\n"
      "  partrain analyze run.db\n"
      "Kineto: each file's rank and the world size come from its distributedInfo; CPU ops and "
      "annotations become slices on their threads, GPU kernels, copies and fills slices on their "
      "streams, ProfilerStep#N the steps, [memory] events the memory samples (category other: "
      "Kineto gives none). Collectives come from record_param_comms (NCCL) or, for gloo, from "
      "c10d's ops paired with gloo's annotations, their process groups inferred from "
      "distributedInfo.pg_config; those the trace cannot place are left unmatched and the trace "
      "says so. Hosts' clocks are aligned by collectives that end together on every member. "
      "Nsight Systems: NCCL's NVTX ranges give the collectives, CUPTI's tables the kernels, "
      "copies and fills. See docs/import.md.\n"
      "The output is written under a temporary name beside it and renamed when complete. A "
      "missing rank is no error: the trace says which ranks are absent.\n"
      "Exit 2 for an existing output without --force, a bad --step-marker or --cycle, or mixed "
      "kinds of input; 3 for an input that cannot be read (malformed JSON, a truncated gzip file, "
      "JSON "
      "that is no Kineto trace, an export of an unknown schema version, world sizes that "
      "disagree, several files of one rank without --cycle).");
  return {cmd, [flags] { return run_import(*flags); }};
}

}  // namespace partrain::cli
