// `partrain export`: a trace as Chrome Trace Event Format JSON for Perfetto (ui.perfetto.dev) and
// chrome://tracing, optionally narrowed to some ranks and steps. Flags, the output file (written
// beside its final name, then renamed) and the summary line live here; the JSON is written by
// profiler/chrome_export.h.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ext/stdio_filebuf.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/trace_selection.h"
#include "core/log.h"
#include "core/output_path.h"
#include "core/own_file.h"
#include "core/rank_list.h"
#include "profiler/chrome_export.h"
#include "profiler/trace_open.h"

namespace partrain::cli {
namespace {

namespace fs = std::filesystem;
using profiler::ChromeExportCounts;
using profiler::ChromeExportOptions;

struct ExportFlags {
  std::string trace;
  std::string output;
  std::string format = "chrome";
  std::optional<std::string> ranks;  // given empty: refused, not "every rank"
  std::string steps;
  bool force = false;
  bool per_rank = false;  // -o is a directory: one rank<N>.json per rank, as HTA reads them
};

StatusOr<ChromeExportOptions> export_options(const ExportFlags& flags) {
  if (flags.format != "chrome") {
    return invalid_argument("--format '{}' is not supported (accepted formats: chrome)",
                            flags.format);
  }
  ChromeExportOptions options;
  if (flags.ranks) {
    ASSIGN_OR_RETURN(options.ranks, parse_rank_list(*flags.ranks));
  }
  if (!flags.steps.empty()) {
    ASSIGN_OR_RETURN(options.steps, parse_step_range(flags.steps));
  }
  return options;
}

// Where the JSON goes: stdout ("-"), a file written whole (beside it, then renamed into place),
// or a device or FIFO written into as it is made (/dev/null, a named pipe).
struct ExportTarget {
  fs::path path;
  bool to_stdout = false;
  bool streamed = false;  // a device or FIFO: never replaced
};

// -o, or the trace's path with .json, with symbolic links followed (a link's target is written,
// the link kept).
StatusOr<ExportTarget> export_target(const ExportFlags& flags) {
  if (flags.output == "-") return ExportTarget{"-", true, false};
  const fs::path given = flags.output.empty() ? fs::path(flags.trace).replace_extension(".json")
                                              : fs::path(flags.output);
  ExportTarget target{follow_links(given), false, false};
  // A Kineto file's own name with .json is itself: say what it is before calling it the output.
  RETURN_IF_ERROR(profiler::check_sqlite_header(flags.trace));
  std::error_code ec;
  if (fs::equivalent(target.path, flags.trace, ec)) {
    return invalid_argument("the output {} is the trace itself: name another file with -o",
                            given.string());
  }
  switch (output_kind(target.path)) {
    case OutputKind::kAbsent:
      break;
    case OutputKind::kDirectory:
      return invalid_argument("{} is a directory: name a file with -o", given.string());
    case OutputKind::kSpecial:
      target.streamed = true;
      break;
    case OutputKind::kRegularFile:
      // As merge and nsys export: what is there may be another export, or another run's trace.
      if (!flags.force) {
        return invalid_argument(
            "{} exists: pass --force to replace it, or name another file with -o", given.string());
      }
      break;
  }
  return target;
}

// The JSON into a stream; a failed write is an error naming `out`.
StatusOr<ChromeExportCounts> export_to_stream(const profiler::SqliteDb& db,
                                              const ChromeExportOptions& options, std::ostream& stream,
                                              const std::string& out) {
  StatusOr<ChromeExportCounts> counts = profiler::export_chrome_trace(db, options, stream);
  int write_error = errno;  // a failed write's (a full disk's ENOSPC)
  if (stream) {
    stream.flush();
    write_error = errno;  // else the flush's
  }
  // The output's own failure names the output, not only "the JSON output".
  if (!stream) return failed("writing {} failed: {}", out, std::strerror(write_error));
  return counts;
}

// Written beside `out` under a temporary name and renamed once complete, so a failed export
// leaves no partial JSON behind. The name is new and unique (O_EXCL): a link planted at it in a
// directory others can write to is never written through.
StatusOr<ChromeExportCounts> export_to_file(const profiler::SqliteDb& db,
                                            const ChromeExportOptions& options,
                                            const fs::path& out) {
  StatusOr<UniqueFile> temp = create_unique_file(
      out.parent_path(), fmt::format(".{}.partrain-tmp-", out.filename().string()));
  if (!temp.is_ok()) return failed("cannot write {}: {}", out.string(), temp.status().message());
  __gnu_cxx::stdio_filebuf<char> buffer(temp->fd, std::ios::out | std::ios::binary);
  std::ostream file(&buffer);
  StatusOr<ChromeExportCounts> counts = export_to_stream(db, options, file, out.string());
  if (buffer.close() == nullptr && counts.is_ok()) {  // closes temp->fd
    counts = failed("writing {} failed: {}", out.string(), std::strerror(errno));
  }
  std::error_code ec;
  if (counts.is_ok()) {
    fs::rename(temp->path, out, ec);
    if (ec) {
      counts =
          failed("cannot rename {} to {}: {}", temp->path.string(), out.string(), ec.message());
    }
  }
  if (!counts.is_ok()) fs::remove(temp->path, ec);
  return counts;
}

// Into a device or FIFO as it is made.
StatusOr<ChromeExportCounts> export_to_special_file(const profiler::SqliteDb& db,
                                                    const ChromeExportOptions& options,
                                                    const fs::path& out) {
  std::ofstream file(out, std::ios::binary);
  if (!file) return failed("cannot write {}: {}", out.string(), std::strerror(errno));
  return export_to_stream(db, options, file, out.string());
}

// --per-rank: the directory (made if absent, its parent must exist) and in it rank<N>.json for
// each selected rank, each a whole export of that rank alone. Every file is checked before the
// first is written, so a refusal leaves the directory as it was.
struct PerRankTarget {
  int rank = 0;
  fs::path path;
};

StatusOr<std::vector<PerRankTarget>> per_rank_targets(const ExportFlags& flags,
                                                      const profiler::TraceReader& reader,
                                                      const ChromeExportOptions& options) {
  if (flags.output.empty() || flags.output == "-") {
    return invalid_argument(
        "--per-rank writes one file per rank: name their directory with -o (e.g. -o hta_traces)");
  }
  const fs::path dir = follow_links(flags.output);
  const OutputKind kind = output_kind(dir);
  if (kind != OutputKind::kAbsent && kind != OutputKind::kDirectory) {
    return invalid_argument("{} is not a directory: --per-rank names a directory with -o",
                            flags.output);
  }
  auto recorded = reader.recorded_ranks();
  if (!recorded.is_ok()) return recorded.status();
  if (recorded->empty()) return invalid_argument("the trace records no ranks: nothing to write");
  const std::vector<int> ranks = options.ranks.empty() ? *recorded : options.ranks;
  for (int rank : ranks) {
    if (std::find(recorded->begin(), recorded->end(), rank) == recorded->end()) {
      return invalid_argument("rank {} is not in this trace (ranks present: {})", rank,
                              format_rank_list(*recorded));
    }
  }
  std::vector<PerRankTarget> targets;
  for (int rank : ranks) {
    PerRankTarget target{rank, dir / fmt::format("rank{}.json", rank)};
    std::error_code same_error;
    if (fs::equivalent(target.path, flags.trace, same_error)) {  // even with --force
      return invalid_argument("the output {} is the trace itself: name another directory with -o",
                              target.path.string());
    }
    if (!flags.force && output_kind(target.path) != OutputKind::kAbsent) {
      return invalid_argument("{} exists: pass --force to replace it, or name another directory",
                              target.path.string());
    }
    targets.push_back(std::move(target));
  }
  std::error_code ec;
  fs::create_directory(dir, ec);
  if (ec) return failed("cannot create the directory {}: {}", flags.output, ec.message());
  return targets;
}

// One file per rank into a directory (HTA's TraceAnalysis(trace_dir=...)).
int run_per_rank_export(const ExportFlags& flags, const ChromeExportOptions& options) {
  auto trace = profiler::open_trace(flags.trace);
  if (!trace.is_ok()) return report_error(trace.status());
  auto targets = per_rank_targets(flags, trace->db, options);
  if (!targets.is_ok()) return report_error(targets.status().with_context(flags.trace));
  for (const PerRankTarget& target : *targets) {
    ChromeExportOptions one = options;
    one.ranks = {target.rank};
    auto counts = export_to_file(trace->db, one, target.path);
    if (!counts.is_ok()) return report_error(counts.status().with_context(flags.trace));
    log::info("wrote {} events ({} slices) of rank {} to {}", counts->events, counts->slices,
              target.rank, target.path.string());
  }
  return 0;
}

int run_export(const ExportFlags& flags) {
  auto options = export_options(flags);
  if (!options.is_ok()) return report_error(options.status());
  if (flags.per_rank) return run_per_rank_export(flags, *options);
  auto out = export_target(flags);
  if (!out.is_ok()) return report_error(out.status());
  auto trace = profiler::open_trace(flags.trace);
  if (!trace.is_ok()) return report_error(trace.status());

  auto counts = out->to_stdout  ? export_to_stream(trace->db, *options, std::cout, "stdout")
                : out->streamed ? export_to_special_file(trace->db, *options, out->path)
                                : export_to_file(trace->db, *options, out->path);
  if (!counts.is_ok()) {
    const int exit_code = report_error(counts.status().with_context(flags.trace));
    return out->to_stdout ? stdout_failure_said(exit_code) : exit_code;
  }
  log::info("wrote {} events ({} slices, {} counters, {} flows) for {} rank{} to {}",
            counts->events, counts->slices, counts->counters, counts->flows, counts->ranks,
            counts->ranks == 1 ? "" : "s", out->to_stdout ? std::string("stdout") : out->path.string());
  return 0;
}

constexpr const char* kExportFooter =
    "The JSON (Chrome Trace Event Format, as PyTorch's profiler writes) holds one process per "
    "rank (pid = rank + 1, named \"rank N (host)\"), one thread per track (\"main (cpu_thread)\", "
    "\"world/split1/color0 (comm)\", CUDA streams), a complete event (\"X\") per slice with step, "
    "micro_batch, "
    "layer and, for collectives, comm_id, seq, op, dtype, count, bytes, peer, group_ranks... as "
    "args; a counter (\"C\") per memory category (\"memory params\", \"memory grads\"..., bytes "
    "in use); and flow arrows from each send to its recv and from the first member of each "
    "collective (same comm_id and seq) to the others. ts and dur are microseconds with ns "
    "precision (1234.567). Top level: distributedInfo {backend (left out when not known), rank, "
    "world_size} as in Kineto "
    "traces, and otherData {run_id, command, status}. See docs/trace-format.md.\n"
    "--rank keeps those ranks (flows between them only). --steps keeps slices of those steps, "
    "and events without a step (memory samples, slices with no step) that overlap the time "
    "window of those steps; each memory counter starts at the window with the bytes then in "
    "use.\n"
    "--per-rank writes rank<N>.json for each rank (of --rank, else every rank) into the "
    "directory -o names, each file one rank's export as Kineto writes one per rank, which "
    "HolisticTraceAnalysis loads: TraceAnalysis(trace_dir=DIR) (keep other .json and .gz files "
    "out of DIR: HTA reads them all). GPU kernels, copies and fills carry stream, device and "
    "correlation as Kineto's do; see docs/import.md, \"HTA\", for what HTA computes on them.\n"
    "Examples:\n"
    "  partrain export partrain-runs/r1.db            # writes partrain-runs/r1.json\n"
    "  partrain export run.db -o trace.json --rank 0,2 --steps 3:5\n"
    "  partrain export run.db -o - | gzip > trace.json.gz\n"
    "  partrain export run.db --per-rank -o hta_traces --steps 3:5\n"
    "Open the file at https://ui.perfetto.dev (\"Open trace file\", or drop it on the page) or "
    "in chrome://tracing (\"Load\"). The browser alone handles JSON up to about 1-2 GB: narrow "
    "bigger traces with --rank/--steps, or run `trace_processor_shell --httpd trace.json` and "
    "open ui.perfetto.dev, which then uses that native trace processor.\n"
    "Exit codes: 0 written; 1 the output could not be written; 2 bad --format, --rank (a rank "
    "not in the trace), --steps or -o (an existing file without --force; with --per-rank, no -o "
    "or one that is not a directory; an output that is the trace itself, even with --force); 3 "
    "unreadable trace (not "
    "a partrain trace, newer schema, "
    "corrupted).";

}  // namespace

Subcommand add_export_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "export",
      "Write a trace as Chrome Trace Event Format JSON for Perfetto (ui.perfetto.dev) "
      "and chrome://tracing");
  auto flags = std::make_shared<ExportFlags>();
  cmd->add_option("trace", flags->trace, "Trace file (a partrain .db)")->required();
  cmd->add_option("-o,--output", flags->output,
                  "Output file (default: the trace's path with .json; - writes to stdout). A "
                  "device or FIFO (/dev/null, a named pipe) is written into; through a symbolic "
                  "link the file it names is written, the link kept. With --per-rank, a "
                  "directory");
  cmd->add_flag("--force", flags->force, "Replace the output file if it exists");
  cmd->add_flag("--per-rank", flags->per_rank,
                "One file per rank, rank<N>.json, in the directory -o names (made if absent): "
                "the layout HTA's TraceAnalysis(trace_dir=...) reads");
  cmd->add_option("--format", flags->format, "Output format; accepted: chrome")
      ->capture_default_str();
  without_env_var(
      cmd->add_option("--rank,--ranks", flags->ranks, "Only these world ranks, e.g. 0,2 or 0-3,6"));
  without_env_var(cmd->add_option("--steps", flags->steps,
                                  "Only these training steps (inclusive): A:B, A:, :B or A"));
  cmd->footer(kExportFooter);
  return {cmd, [flags] { return run_export(*flags); }};
}

}  // namespace partrain::cli
