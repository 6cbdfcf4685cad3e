#include "profiler/import/nsys_import.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "core/rank_list.h"
#include "profiler/import/import_output.h"
#include "profiler/import/imported_run.h"
#include "profiler/import/nsys_export.h"
#include "profiler/import/nsys_nccl.h"
#include "profiler/import/nsys_rows.h"
#include "profiler/step_marker.h"

namespace partrain::profiler {
namespace fs = std::filesystem;
namespace {

struct ProcessFacts {
  std::map<int, int64_t> kernels_per_device;
  std::vector<StepSpan> steps;
  int64_t pid = 0;
};

struct Report {
  NsysExport file;
  int64_t shift_ns = 0;  // its session clock moved onto the reference report's
};

// What the first pass over every report learns.
struct ScannedReports {
  std::vector<Report> reports;
  std::map<NsysProcess, NcclProcessTrace> nccl;
  std::map<NsysProcess, ProcessFacts> facts;
};

// First pass over one report: NCCL's calls, the NCCL kernels and their launches, steps, and
// which processes ran GPU work.
Status scan_report(int index, const Report& report, std::string_view marker_text,
                   std::map<NsysProcess, NcclProcessTrace>& nccl,
                   std::map<NsysProcess, ProcessFacts>& facts) {
  const NsysExport& file = report.file;
  const SqliteDb& db = file.db;
  auto query_error = [&](std::string_view what) {
    return make_status(StatusCode::kUnreadable, "{}: reading {} failed: {}", file.path.string(),
                       what, db.error_message());
  };
  if (file.has_table("CUPTI_ACTIVITY_KIND_KERNEL")) {
    ASSIGN_OR_RETURN(
        auto kernels,
        SqliteStatement::prepare(
            db,
            "SELECT globalPid, deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1, 2"));
    while (kernels.step() == SQLITE_ROW) {
      ProcessFacts& f = facts[{index, nsys_process_of(kernels.column_int(0))}];
      f.pid = nsys_pid_of(kernels.column_int(0));
      f.kernels_per_device[static_cast<int>(kernels.column_int(1))] += kernels.column_int(2);
    }
  }
  if (!file.has_table("NVTX_EVENTS")) return Status::ok();
  // NCCL's domain, per process (domain ids are a process's own).
  std::set<std::pair<int64_t, int64_t>> nccl_domains;
  {
    ASSIGN_OR_RETURN(
        auto domains,
        SqliteStatement::prepare(
            db, fmt::format("SELECT e.globalTid, e.domainId FROM NVTX_EVENTS e LEFT JOIN StringIds "
                            "s ON s.id = e.textId "
                            "WHERE e.eventType = {} AND COALESCE(e.text, s.value) = 'NCCL'",
                            kNvtxDomainCreate)));
    while (domains.step() == SQLITE_ROW) {
      nccl_domains.insert({nsys_process_of(domains.column_int(0)), domains.column_int(1)});
    }
  }
  const NcclPayloadSchemas schemas = NcclPayloadSchemas::load(db);
  const bool blobs = file.has_column("NVTX_EVENTS", "binaryData");
  std::map<int64_t, StepMarker> markers;  // per process: a marker without a number counts
  ASSIGN_OR_RETURN(auto ranges, SqliteStatement::prepare(db, nvtx_ranges_query(blobs)));
  int rc = SQLITE_ROW;
  while ((rc = ranges.step()) == SQLITE_ROW) {
    const int64_t tid = ranges.column_int(2);
    const int64_t process = nsys_process_of(tid);
    const std::string name = ranges.column_text(4);
    const int64_t start = ranges.column_int(0) + report.shift_ns;
    const int64_t end = ranges.column_int(1) + report.shift_ns;
    auto marker = markers.find(process);
    if (marker == markers.end()) {
      ASSIGN_OR_RETURN(StepMarker compiled, StepMarker::compile(marker_text));
      marker = markers.emplace(process, std::move(compiled)).first;
    }
    if (auto step = marker->second.step_of(name)) {
      ProcessFacts& f = facts[{index, process}];
      f.pid = nsys_pid_of(tid);
      f.steps.push_back({*step, start, end});
    }
    const int64_t domain = ranges.column_int(3);
    if (nccl_domains.contains({process, domain})) {
      NcclCall call{tid, name, start, end, {}};
      if (!ranges.column_is_null(5)) {
        call.payload = schemas.decode(domain, ranges.column_text(5), name);
      }
      nccl[{index, process}].calls.push_back(std::move(call));
    }
  }
  if (rc != SQLITE_DONE) return query_error("NVTX_EVENTS");
  if (nccl.empty() || !file.has_table("CUPTI_ACTIVITY_KIND_KERNEL") ||
      !file.has_table("CUPTI_ACTIVITY_KIND_RUNTIME")) {
    return Status::ok();
  }
  // NCCL kernels with the call that launched them (correlation ids are a process's own).
  ASSIGN_OR_RETURN(
      auto launches,
      SqliteStatement::prepare(
          db,
          "SELECT r.globalTid, r.start, k.start, k.end, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
          "JOIN StringIds s ON s.id = k.demangledName "
          "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
          "AND (r.globalTid >> 24) = (k.globalPid >> 24) WHERE s.value LIKE 'nccl%'"));
  while ((rc = launches.step()) == SQLITE_ROW) {
    const int64_t tid = launches.column_int(0);
    auto trace = nccl.find({index, nsys_process_of(tid)});
    if (trace == nccl.end()) continue;
    trace->second.launches.push_back(
        {tid, launches.column_int(1) + report.shift_ns, launches.column_int(2) + report.shift_ns,
         launches.column_int(3) + report.shift_ns, launches.column_text(4)});
  }
  if (rc != SQLITE_DONE) return query_error("the NCCL kernels' launches");
  for (auto& [process, trace] : nccl) {
    std::sort(trace.launches.begin(), trace.launches.end(),
              [](const auto& a, const auto& b) { return a.launch_ns < b.launch_ns; });
  }
  return Status::ok();
}

// Moves every time of the first pass from one reference clock to one `delta` later.
void move_clock(int64_t delta, ScannedReports& scanned) {
  for (Report& r : scanned.reports) r.shift_ns -= delta;
  for (auto& [process, trace] : scanned.nccl) {
    for (NcclCall& c : trace.calls) {
      c.start_ns -= delta;
      c.end_ns -= delta;
    }
    for (NcclKernelLaunch& l : trace.launches) {
      l.launch_ns -= delta;
      l.start_ns -= delta;
      l.end_ns -= delta;
    }
  }
  for (auto& [process, f] : scanned.facts) {
    for (StepSpan& s : f.steps) {
      s.start_ns -= delta;
      s.end_ns -= delta;
    }
  }
}

StatusOr<ScannedReports> scan_reports(const std::vector<fs::path>& inputs, std::string_view marker,
                                      const TraceImportOptions& options) {
  ScannedReports out;
  for (const fs::path& path : inputs) {
    ASSIGN_OR_RETURN(NsysExport file, open_nsys_export(path));
    out.reports.push_back(Report{std::move(file), 0});
  }
  const int64_t first_unix_ns = out.reports.front().file.session_start_unix_ns;
  for (size_t i = 0; i < out.reports.size(); ++i) {
    Report& report = out.reports[i];
    report.shift_ns = report.file.session_start_unix_ns - first_unix_ns;
    if (options.progress) {
      options.progress(fmt::format("reading {}", inputs[i].filename().string()),
                       static_cast<int>(i) + 1, static_cast<int>(inputs.size()));
    }
    RETURN_IF_ERROR(scan_report(static_cast<int>(i), report, marker, out.nccl, out.facts));
  }
  return out;
}

// The processes that are ranks (those that ran GPU work or called NCCL) and which rank each is.
struct RankedProcesses {
  std::map<NsysProcess, NcclProcessTrace> candidates;
  NcclRankMap map;
  std::map<int, NsysProcess> process_of_rank;
};

StatusOr<RankedProcesses> rank_processes(const ScannedReports& scanned,
                                         const std::vector<fs::path>& inputs) {
  RankedProcesses out;
  out.candidates = scanned.nccl;
  for (const auto& [process, f] : scanned.facts) {
    if (!f.kernels_per_device.empty()) out.candidates.try_emplace(process);
  }
  if (out.candidates.empty()) {
    return make_status(StatusCode::kUnreadable,
                       "{}: no process in it ran a CUDA kernel or called NCCL: nothing to import "
                       "(was the report made with `nsys profile -t cuda,nvtx`?)",
                       inputs.front().string());
  }
  out.map = nccl_ranks(out.candidates);
  for (const auto& [process, rank] : out.map.rank_of) {
    auto [it, inserted] = out.process_of_rank.try_emplace(rank, process);
    if (!inserted) {
      const NsysProcess& other = it->second;
      return make_status(
          StatusCode::kUnreadable,
          "{} (process {}) is rank {}, and so is {} (process {}): give one report per rank, or "
          "one report holding each rank once",
          inputs[process.first].string(), process.second & 0xFFFFFF, rank,
          inputs[other.first].string(), other.second & 0xFFFFFF);
    }
  }
  return out;
}

std::vector<ImportedRank> imported_ranks(const ScannedReports& scanned,
                                         const RankedProcesses& ranked) {
  std::vector<ImportedRank> ranks;
  for (const auto& [rank_number, process] : ranked.process_of_rank) {
    const Report& report = scanned.reports[process.first];
    ImportedRank rank;
    rank.rank = rank_number;
    rank.file = report.file.path;
    rank.host = report.file.host;
    // One session reads one clock; reports of one named host share it too.
    rank.clock_domain = rank.host.empty() ? report.file.path.string() : rank.host;
    rank.shift_ns = report.shift_ns;
    rank.pid = process.second & 0xFFFFFF;
    if (auto f = scanned.facts.find(process); f != scanned.facts.end()) {
      const auto& devices = f->second.kernels_per_device;
      auto busiest =
          std::max_element(devices.begin(), devices.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      if (busiest != devices.end()) rank.device = fmt::format("cuda:{}", busiest->first);
      rank.steps = f->second.steps;
      std::sort(rank.steps.begin(), rank.steps.end(),
                [](const StepSpan& a, const StepSpan& b) { return a.start_ns < b.start_ns; });
    }
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

// The second pass: run and rank rows, every report's rows, steps, collectives, stats; then the
// file renamed into place.
Status write_trace(ImportOutput& output, const ImportedRunDescription& run,
                   const ScannedReports& scanned, const RankedProcesses& ranked,
                   std::vector<ImportedRank>& ranks, NcclCollectives& collectives,
                   TraceImportSummary& summary) {
  TraceWriter& writer = output.writer();
  int64_t first_ns = 0;
  for (const ImportedRank& r : ranks) first_ns = std::min(first_ns, r.on_timeline(0));
  append_run_and_ranks(writer, run, ranks, summary.missing_ranks, first_ns, summary.run_id);
  std::map<NsysProcess, const ImportedRank*> rank_of_process;
  for (const ImportedRank& r : ranks) rank_of_process[ranked.process_of_rank.at(r.rank)] = &r;
  int64_t last_ns = 0, reversed = 0;
  std::map<int, int64_t> events_per_rank;
  for (size_t i = 0; i < scanned.reports.size(); ++i) {
    const Report& report = scanned.reports[i];
    ASSIGN_OR_RETURN(NsysRowCounts counts, write_nsys_rows(writer, report.file, report.shift_ns,
                                                           static_cast<int>(i), rank_of_process));
    summary.events += counts.events;
    last_ns = std::max(last_ns, counts.last_ns);
    reversed += counts.reversed;
    for (const auto& [rank, n] : counts.per_rank) events_per_rank[rank] += n;
  }
  if (reversed > 0) {  // as the Kineto import says of a negative dur
    summary.warnings.push_back(fmt::format(
        "{} events end before they start: each is kept as an instant (0 long) at its start",
        reversed));
  }
  for (ImportedRank& r : ranks) r.events = events_per_rank[r.rank];
  summary.events += append_steps(writer, ranks);
  summary.collectives = append_collectives(writer, ranks, collectives.by_rank);
  summary.events += summary.collectives;
  summary.unmatched_collectives = append_unmatched(writer, collectives.unmatched, summary.warnings);
  return output.finish(last_ns);
}

StatusOr<TraceImportSummary> import_reports(const TraceImportOptions& options) {
  const std::string_view marker =
      options.step_marker.empty() ? kDefaultStepMarker : std::string_view(options.step_marker);
  RETURN_IF_ERROR(StepMarker::compile(marker).status());
  ASSIGN_OR_RETURN(ScannedReports scanned, scan_reports(options.inputs, marker, options));
  ASSIGN_OR_RETURN(RankedProcesses ranked, rank_processes(scanned, options.inputs));
  if (ranked.map.world_size > kMostRanks) {
    // Checked before anything is sized by it (missing ranks, the world group).
    return make_status(StatusCode::kUnreadable,
                       "an NCCL communicator's payload field 'No. of ranks' says {} ranks, past "
                       "what partrain imports (a world of at most {} ranks, the largest partrain "
                       "launches): the report is damaged or was edited",
                       ranked.map.world_size, kMostRanks);
  }
  TraceImportSummary summary;
  summary.world_size = ranked.map.world_size;
  if (!ranked.map.from_communicators && ranked.candidates.size() > 1) {
    summary.warnings.push_back(
        "no NCCL communicator creation with its payload in the reports (NCCL 2.19 or newer, "
        "exported with --include-blobs=true, gives one): ranks are numbered by file, then by "
        "process id");
  }
  // The reference clock is the report holding the lowest rank: its ranks' offsets are 0.
  const Report& reference = scanned.reports[ranked.process_of_rank.begin()->second.first];
  if (reference.shift_ns != 0) move_clock(reference.shift_ns, scanned);
  std::vector<ImportedRank> ranks = imported_ranks(scanned, ranked);
  NcclCollectives collectives = nccl_collectives(ranked.candidates, ranked.map);
  fit_rank_clocks(ranks, std::move(collectives.ends), summary.warnings);
  summary.missing_ranks = missing_ranks(ranks, summary.world_size, summary.warnings);

  ASSIGN_OR_RETURN(std::unique_ptr<ImportOutput> output,
                   ImportOutput::create(options.output, options.overwrite));
  ImportedRunDescription run;
  run.source = "nsys";
  run.backend = scanned.nccl.empty() ? "" : "nccl";
  run.world_size = summary.world_size;
  run.reference_unix_ns = reference.file.session_start_unix_ns;
  run.files = options.inputs;
  run.command_line = options.command_line;
  if (options.progress) options.progress("writing the trace", 1, 1);
  RETURN_IF_ERROR(write_trace(*output, run, scanned, ranked, ranks, collectives, summary));
  summary.ranks = rank_summaries(ranks);
  std::error_code error;
  for (const fs::path& p : options.inputs) summary.input_bytes += fs::file_size(p, error);
  return summary;
}

}  // namespace

bool is_sqlite_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[16] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == sizeof magic &&
         std::string_view(magic, sizeof magic) == std::string_view("SQLite format 3\0", 16);
}

StatusOr<TraceImportSummary> import_nsys_reports(const TraceImportOptions& options) {
  return import_or_status("Nsight Systems reports", [&] { return import_reports(options); });
}

}  // namespace partrain::profiler
