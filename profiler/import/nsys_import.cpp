#include "profiler/import/nsys_import.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "profiler/import/import_output.h"
#include "profiler/import/imported_run.h"
#include "profiler/import/nsys_export.h"
#include "profiler/import/nsys_nccl.h"
#include "profiler/step_marker.h"

namespace partrain::profiler {
namespace fs = std::filesystem;
namespace {

// nsys's NVTX event types (ENUM_NSYS_EVENT_TYPE): push/pop and start/end ranges, domain creation.
constexpr int kNvtxPushPopRange = 59;
constexpr int kNvtxStartEndRange = 60;
constexpr int kNvtxDomainCreate = 75;

// ENUM_CUDA_MEMCPY_OPER, whose first values are CUPTI's.
std::string copy_name(int64_t kind) {
  static constexpr std::string_view kKinds[] = {"other", "HtoD", "DtoH", "HtoA", "AtoH",
                                                "AtoA",  "AtoD", "DtoA", "DtoD", "HtoH",
                                                "PtoP",  "HtoD", "DtoH", "DtoD"};
  const std::string_view name =
      kind >= 0 && kind < static_cast<int64_t>(std::size(kKinds)) ? kKinds[kind] : "other";
  return fmt::format("memcpy {}", name);
}

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": nsys keeps the CUPTI callback's version.
std::string runtime_name(std::string name) {
  const size_t v = name.rfind("_v");
  if (v != std::string::npos && v + 2 < name.size() &&
      std::all_of(name.begin() + static_cast<std::ptrdiff_t>(v) + 2, name.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    name.resize(v);
  }
  return name;
}

std::string stream_track(int64_t device, int64_t stream) {
  return fmt::format("gpu{} stream {}", device, stream);
}

struct ProcessFacts {
  std::map<int, int64_t> kernels_per_device;
  std::vector<StepSpan> steps;
  int64_t pid = 0;
};

struct Report {
  NsysExport file;
  int64_t shift_ns = 0;  // its session clock moved onto the reference report's
  std::string host;
  std::map<int64_t, std::string> thread_names;  // globalTid -> name
};

std::string host_of(const NsysExport& file) {
  if (!file.has_table("TARGET_INFO_SYSTEM_ENV") ||
      !file.has_column("TARGET_INFO_SYSTEM_ENV", "name")) {
    return {};
  }
  auto host = SqliteStatement::prepare(
      file.db,
      "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE lower(name) IN ('hostname', "
      "'host name') LIMIT 1");
  return host.is_ok() && host->step() == SQLITE_ROW ? host->column_text(0) : std::string();
}

std::map<int64_t, std::string> thread_names_of(const NsysExport& file) {
  std::map<int64_t, std::string> names;
  if (!file.has_table("ThreadNames")) return names;
  auto stmt = SqliteStatement::prepare(
      file.db,
      "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId");
  while (stmt.is_ok() && stmt->step() == SQLITE_ROW)
    names[stmt->column_int(0)] = stmt->column_text(1);
  return names;
}

std::string thread_track(const Report& report, int64_t global_tid) {
  auto name = report.thread_names.find(global_tid);
  return name == report.thread_names.end()
             ? fmt::format("thread {}", nsys_tid_of(global_tid))
             : fmt::format("thread {} ({})", nsys_tid_of(global_tid), name->second);
}

const char* kRangesSql =
    "SELECT e.start, e.end, e.globalTid, e.domainId, COALESCE(e.text, s.value), {} "
    "FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
    "WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL ORDER BY e.start";

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
  ASSIGN_OR_RETURN(auto ranges,
                   SqliteStatement::prepare(
                       db, fmt::format(fmt::runtime(kRangesSql), blobs ? "e.binaryData" : "NULL")));
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

// Second pass over one report: its rows of the ranks' processes, as partrain events on the
// timeline, in batches.
class ReportWriter {
 public:
  ReportWriter(TraceWriter& writer, const Report& report, int index,
               const std::map<NsysProcess, const ImportedRank*>& ranks)
      : writer_(writer), report_(report), index_(index), ranks_(ranks) {}

  Status write() {
    const NsysExport& file = report_.file;
    if (file.has_table("CUPTI_ACTIVITY_KIND_KERNEL")) RETURN_IF_ERROR(kernels());
    if (file.has_table("CUPTI_ACTIVITY_KIND_MEMCPY")) RETURN_IF_ERROR(copies());
    if (file.has_table("CUPTI_ACTIVITY_KIND_MEMSET")) RETURN_IF_ERROR(fills());
    if (file.has_table("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")) RETURN_IF_ERROR(syncs());
    if (file.has_table("CUPTI_ACTIVITY_KIND_RUNTIME")) RETURN_IF_ERROR(runtime_calls());
    if (file.has_table("NVTX_EVENTS")) RETURN_IF_ERROR(ranges());
    flush();
    return Status::ok();
  }
  int64_t events() const { return events_; }
  int64_t last_ns() const { return last_ns_; }
  const std::map<int, int64_t>& events_per_rank() const { return per_rank_; }

 private:
  const ImportedRank* rank_of(int64_t global_id) const {
    auto it = ranks_.find({index_, nsys_process_of(global_id)});
    return it == ranks_.end() ? nullptr : it->second;
  }

  template <typename Row>
  Status each_row(std::string_view sql, std::string_view what, Row&& row) {
    ASSIGN_OR_RETURN(auto stmt, SqliteStatement::prepare(report_.file.db, sql));
    int rc = SQLITE_ROW;
    while ((rc = stmt.step()) == SQLITE_ROW) row(stmt);
    if (rc != SQLITE_DONE) {
      return make_status(StatusCode::kUnreadable, "{}: reading {} failed: {}",
                         report_.file.path.string(), what, report_.file.db.error_message());
    }
    return Status::ok();
  }

  SliceEvent slice(const ImportedRank& rank, TrackKind kind, std::string track, std::string name,
                   SliceCategory category, int64_t start, int64_t end) const {
    SliceEvent s;
    s.rank = rank.rank;
    s.track_kind = kind;
    s.track = std::move(track);
    s.name = std::move(name);
    s.category = category;
    const int64_t on_reference = start + report_.shift_ns;
    s.step = rank.step_at(on_reference);
    s.ts_ns = rank.on_timeline(on_reference);
    s.dur_ns = std::max<int64_t>(0, end - start);
    last_ns_ = std::max(last_ns_, s.ts_ns + s.dur_ns);
    return s;
  }

  void add(const ImportedRank& rank, TraceEvent event) {
    batch_.push_back(std::move(event));
    ++events_;
    ++per_rank_[rank.rank];
    if (batch_.size() >= 4096) flush();
  }
  void flush() {
    writer_.append(batch_);
    batch_.clear();
  }

  Status kernels() {
    return each_row(
        "SELECT k.start, k.end, k.deviceId, k.streamId, k.correlationId, k.globalPid, s.value, "
        "k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.registersPerThread, "
        "k.staticSharedMemory, k.dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "LEFT JOIN StringIds s ON s.id = k.demangledName",
        "CUPTI_ACTIVITY_KIND_KERNEL", [&](const SqliteStatement& row) {
          const ImportedRank* rank = rank_of(row.column_int(5));
          if (rank == nullptr) return;
          KernelRecord k;
          const int64_t device = row.column_int(2), stream = row.column_int(3);
          k.slice =
              slice(*rank, TrackKind::kCudaStream, stream_track(device, stream), row.column_text(6),
                    SliceCategory::kKernel, row.column_int(0), row.column_int(1));
          k.correlation_id = static_cast<uint32_t>(row.column_int(4));
          k.device = static_cast<int32_t>(device);
          k.stream = stream;
          for (int i = 0; i < 3; ++i) {
            k.grid[i] = static_cast<int32_t>(row.column_int(7 + i));
            k.block[i] = static_cast<int32_t>(row.column_int(10 + i));
          }
          k.registers = static_cast<int32_t>(row.column_int(13));
          k.static_shared_bytes = static_cast<int32_t>(row.column_int(14));
          k.dynamic_shared_bytes = static_cast<int32_t>(row.column_int(15));
          add(*rank, std::move(k));
        });
  }

  Status copies() {
    return each_row(
        "SELECT start, end, deviceId, streamId, correlationId, globalPid, bytes, copyKind "
        "FROM CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMCPY", [&](const SqliteStatement& row) {
          const ImportedRank* rank = rank_of(row.column_int(5));
          if (rank == nullptr) return;
          TransferRecord t;
          const int64_t device = row.column_int(2), stream = row.column_int(3);
          t.slice = slice(*rank, TrackKind::kCudaStream, stream_track(device, stream),
                          copy_name(row.column_int(7)), SliceCategory::kMemcpy, row.column_int(0),
                          row.column_int(1));
          t.bytes = static_cast<uint64_t>(std::max<int64_t>(0, row.column_int(6)));
          t.correlation_id = static_cast<uint32_t>(row.column_int(4));
          t.device = static_cast<int32_t>(device);
          t.stream = stream;
          add(*rank, std::move(t));
        });
  }

  Status fills() {
    return each_row(
        "SELECT start, end, deviceId, streamId, correlationId, globalPid, bytes "
        "FROM CUPTI_ACTIVITY_KIND_MEMSET",
        "CUPTI_ACTIVITY_KIND_MEMSET", [&](const SqliteStatement& row) {
          const ImportedRank* rank = rank_of(row.column_int(5));
          if (rank == nullptr) return;
          TransferRecord t;
          const int64_t device = row.column_int(2), stream = row.column_int(3);
          t.slice = slice(*rank, TrackKind::kCudaStream, stream_track(device, stream), "memset",
                          SliceCategory::kMemset, row.column_int(0), row.column_int(1));
          t.bytes = static_cast<uint64_t>(std::max<int64_t>(0, row.column_int(6)));
          t.correlation_id = static_cast<uint32_t>(row.column_int(4));
          t.device = static_cast<int32_t>(device);
          t.stream = stream;
          add(*rank, std::move(t));
        });
  }

  Status syncs() {
    return each_row(
        "SELECT start, end, deviceId, streamId, globalPid, syncType "
        "FROM CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", [&](const SqliteStatement& row) {
          const ImportedRank* rank = rank_of(row.column_int(4));
          if (rank == nullptr) return;
          static constexpr std::string_view kTypes[] = {"sync", "event sync", "stream wait sync",
                                                        "stream sync", "context sync"};
          const int64_t type = row.column_int(5);
          const std::string_view name =
              type >= 0 && type < static_cast<int64_t>(std::size(kTypes)) ? kTypes[type] : "sync";
          add(*rank, slice(*rank, TrackKind::kCudaStream,
                           stream_track(row.column_int(2), row.column_int(3)), std::string(name),
                           SliceCategory::kSync, row.column_int(0), row.column_int(1)));
        });
  }

  Status runtime_calls() {
    return each_row(
        "SELECT r.start, r.end, r.globalTid, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "LEFT JOIN StringIds s ON s.id = r.nameId",
        "CUPTI_ACTIVITY_KIND_RUNTIME", [&](const SqliteStatement& row) {
          const int64_t tid = row.column_int(2);
          const ImportedRank* rank = rank_of(tid);
          if (rank == nullptr) return;
          add(*rank, slice(*rank, TrackKind::kCpuThread, thread_track(report_, tid),
                           runtime_name(row.column_text(3)), SliceCategory::kPhase,
                           row.column_int(0), row.column_int(1)));
        });
  }

  // NVTX ranges: the steps (their spans, as the first pass found them), and the rest as phases.
  Status ranges() {
    return each_row(
        fmt::format(fmt::runtime(kRangesSql), "NULL"), "NVTX_EVENTS",
        [&](const SqliteStatement& row) {
          const int64_t tid = row.column_int(2);
          const ImportedRank* rank = rank_of(tid);
          if (rank == nullptr) return;
          const int64_t start = row.column_int(0), end = row.column_int(1);
          const int64_t on_reference = start + report_.shift_ns;
          const bool step =
              std::any_of(rank->steps.begin(), rank->steps.end(), [&](const StepSpan& s) {
                return s.start_ns == on_reference && s.end_ns == end + report_.shift_ns;
              });
          add(*rank,
              slice(*rank, TrackKind::kCpuThread, thread_track(report_, tid), row.column_text(4),
                    step ? SliceCategory::kStep : SliceCategory::kPhase, start, end));
        });
  }

  TraceWriter& writer_;
  const Report& report_;
  int index_;
  const std::map<NsysProcess, const ImportedRank*>& ranks_;
  std::vector<TraceEvent> batch_;
  int64_t events_ = 0;
  mutable int64_t last_ns_ = INT64_MIN;
  std::map<int, int64_t> per_rank_;
};

// Moves every time of the first pass from one reference clock to one `delta` later.
void move_clock(int64_t delta, std::vector<Report>& reports,
                std::map<NsysProcess, NcclProcessTrace>& nccl,
                std::map<NsysProcess, ProcessFacts>& facts) {
  for (Report& r : reports) r.shift_ns -= delta;
  for (auto& [process, trace] : nccl) {
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
  for (auto& [process, f] : facts) {
    for (StepSpan& s : f.steps) {
      s.start_ns -= delta;
      s.end_ns -= delta;
    }
  }
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
  const std::string_view marker =
      options.step_marker.empty() ? kDefaultStepMarker : std::string_view(options.step_marker);
  RETURN_IF_ERROR(StepMarker::compile(marker).status());
  std::vector<Report> reports;
  for (const fs::path& path : options.inputs) {
    ASSIGN_OR_RETURN(NsysExport file, open_nsys_export(path));
    Report report;
    report.file = std::move(file);
    report.host = host_of(report.file);
    report.thread_names = thread_names_of(report.file);
    reports.push_back(std::move(report));
  }
  const int64_t first_unix_ns = reports.front().file.session_start_unix_ns;
  std::map<NsysProcess, NcclProcessTrace> nccl;
  std::map<NsysProcess, ProcessFacts> facts;
  for (size_t i = 0; i < reports.size(); ++i) {
    reports[i].shift_ns = reports[i].file.session_start_unix_ns - first_unix_ns;
    RETURN_IF_ERROR(scan_report(static_cast<int>(i), reports[i], marker, nccl, facts));
  }
  // The ranks: processes that ran GPU work or called NCCL.
  std::map<NsysProcess, NcclProcessTrace> candidates = nccl;
  for (const auto& [process, f] : facts) {
    if (!f.kernels_per_device.empty()) candidates.try_emplace(process);
  }
  if (candidates.empty()) {
    return make_status(StatusCode::kUnreadable,
                       "{}: no process in it ran a CUDA kernel or called NCCL: nothing to import "
                       "(was the report made with `nsys profile -t cuda,nvtx`?)",
                       options.inputs.front().string());
  }
  const NcclRankMap rank_map = nccl_ranks(candidates);
  TraceImportSummary summary;
  summary.world_size = rank_map.world_size;
  if (!rank_map.from_communicators && candidates.size() > 1) {
    summary.warnings.push_back(
        "no NCCL communicator creation with its payload in the reports (NCCL 2.19 or newer, "
        "exported with --include-blobs=true, gives one): ranks are numbered by file, then by "
        "process id");
  }
  std::map<int, NsysProcess> process_of_rank;
  for (const auto& [process, rank] : rank_map.rank_of) {
    auto [it, inserted] = process_of_rank.try_emplace(rank, process);
    if (!inserted) {
      const NsysProcess& other = it->second;
      return make_status(
          StatusCode::kUnreadable,
          "{} (process {}) is rank {}, and so is {} (process {}): give one report per rank, or "
          "one report holding each rank once",
          options.inputs[process.first].string(), process.second & 0xFFFFFF, rank,
          options.inputs[other.first].string(), other.second & 0xFFFFFF);
    }
  }
  // The reference clock is the report holding the lowest rank: its ranks' offsets are 0.
  const int64_t delta = reports[process_of_rank.begin()->second.first].shift_ns;
  if (delta != 0) move_clock(delta, reports, nccl, facts);
  const int64_t reference_unix_ns =
      reports[process_of_rank.begin()->second.first].file.session_start_unix_ns;
  std::vector<ImportedRank> ranks;
  for (const auto& [rank_number, process] : process_of_rank) {
    const Report& report = reports[process.first];
    ImportedRank rank;
    rank.rank = rank_number;
    rank.file = report.file.path;
    rank.host = report.host;
    // One session reads one clock; reports of one named host share it too.
    rank.clock_domain = report.host.empty() ? report.file.path.string() : report.host;
    rank.shift_ns = report.shift_ns;
    rank.pid = process.second & 0xFFFFFF;
    if (auto f = facts.find(process); f != facts.end()) {
      const auto& devices = f->second.kernels_per_device;
      if (!devices.empty()) {
        rank.device = fmt::format(
            "cuda:{}",
            std::max_element(devices.begin(), devices.end(), [](const auto& a, const auto& b) {
              return a.second < b.second;
            })->first);
      }
      rank.steps = f->second.steps;
      std::sort(rank.steps.begin(), rank.steps.end(),
                [](const StepSpan& a, const StepSpan& b) { return a.start_ns < b.start_ns; });
    }
    ranks.push_back(std::move(rank));
  }
  NcclCollectives collectives = nccl_collectives(candidates, rank_map);
  fit_rank_clocks(ranks, std::move(collectives.ends), summary.warnings);
  for (int r = 0; r < summary.world_size; ++r) {
    if (!process_of_rank.contains(r)) summary.missing_ranks.push_back(r);
  }
  if (!summary.missing_ranks.empty()) {
    summary.warnings.push_back(fmt::format("ranks {} of {} are in no report: the trace says so",
                                           fmt::join(summary.missing_ranks, ","),
                                           summary.world_size));
  }

  ASSIGN_OR_RETURN(std::unique_ptr<ImportOutput> output,
                   ImportOutput::create(options.output, options.overwrite));
  TraceWriter& writer = output->writer();
  ImportedRunDescription run;
  run.source = "nsys";
  run.backend = nccl.empty() ? "" : "nccl";
  run.world_size = summary.world_size;
  run.reference_unix_ns = reference_unix_ns;
  run.files = options.inputs;
  run.command_line = options.command_line;
  int64_t first_ns = 0;
  for (const ImportedRank& r : ranks) first_ns = std::min(first_ns, r.on_timeline(0));
  append_run_and_ranks(writer, run, ranks, summary.missing_ranks, first_ns, summary.run_id);
  std::map<NsysProcess, const ImportedRank*> rank_of_process;
  for (const ImportedRank& r : ranks) rank_of_process[process_of_rank.at(r.rank)] = &r;
  int64_t last_ns = 0;
  std::map<int, int64_t> events_per_rank;
  for (size_t i = 0; i < reports.size(); ++i) {
    ReportWriter report_writer(writer, reports[i], static_cast<int>(i), rank_of_process);
    RETURN_IF_ERROR(report_writer.write());
    summary.events += report_writer.events();
    last_ns = std::max(last_ns, report_writer.last_ns());
    for (const auto& [rank, n] : report_writer.events_per_rank()) events_per_rank[rank] += n;
  }
  const int64_t steps = append_steps(writer, ranks);
  summary.collectives = append_collectives(writer, ranks, collectives.by_rank);
  summary.unmatched_collectives = append_unmatched(writer, collectives.unmatched, summary.warnings);
  RETURN_IF_ERROR(output->finish(last_ns));
  for (ImportedRank& r : ranks) r.events = events_per_rank[r.rank];
  summary.ranks = rank_summaries(ranks);
  summary.events += summary.collectives + steps;
  std::error_code error;
  for (const fs::path& p : options.inputs) summary.input_bytes += fs::file_size(p, error);
  return summary;
}

}  // namespace partrain::profiler
