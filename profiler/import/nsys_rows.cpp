#include "profiler/import/nsys_rows.h"

#include <algorithm>
#include <vector>

namespace partrain::profiler {
namespace {

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

class RowWriter {
 public:
  RowWriter(TraceWriter& writer, const NsysExport& file, int64_t shift_ns, int index,
            const std::map<NsysProcess, const ImportedRank*>& ranks)
      : writer_(writer), file_(file), shift_ns_(shift_ns), index_(index), ranks_(ranks) {}

  Status write() {
    const NsysExport& file = file_;
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
  int64_t reversed() const { return reversed_; }
  const std::map<int, int64_t>& events_per_rank() const { return per_rank_; }

 private:
  const ImportedRank* rank_of(int64_t global_id) const {
    auto it = ranks_.find({index_, nsys_process_of(global_id)});
    return it == ranks_.end() ? nullptr : it->second;
  }

  template <typename Row>
  Status each_row(std::string_view sql, std::string_view what, Row&& row) {
    ASSIGN_OR_RETURN(auto stmt, SqliteStatement::prepare(file_.db, sql));
    int rc = SQLITE_ROW;
    while ((rc = stmt.step()) == SQLITE_ROW) row(stmt);
    if (rc != SQLITE_DONE) {
      return make_status(StatusCode::kUnreadable, "{}: reading {} failed: {}", file_.path.string(),
                         what, file_.db.error_message());
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
    const int64_t on_reference = start + shift_ns_;
    s.step = rank.step_at(on_reference);
    s.ts_ns = rank.on_timeline(on_reference);
    if (end < start) ++reversed_;
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
          add(*rank, slice(*rank, TrackKind::kCpuThread, file_.thread_track(tid),
                           runtime_name(row.column_text(3)), SliceCategory::kPhase,
                           row.column_int(0), row.column_int(1)));
        });
  }

  // NVTX ranges: the steps (their spans, as the first pass found them), and the rest as phases.
  Status ranges() {
    return each_row(
        nvtx_ranges_query(/*with_payloads=*/false), "NVTX_EVENTS", [&](const SqliteStatement& row) {
          const int64_t tid = row.column_int(2);
          const ImportedRank* rank = rank_of(tid);
          if (rank == nullptr) return;
          const int64_t start = row.column_int(0), end = row.column_int(1);
          const int64_t on_reference = start + shift_ns_;
          const bool step =
              std::any_of(rank->steps.begin(), rank->steps.end(), [&](const StepSpan& s) {
                return s.start_ns == on_reference && s.end_ns == end + shift_ns_;
              });
          add(*rank,
              slice(*rank, TrackKind::kCpuThread, file_.thread_track(tid), row.column_text(4),
                    step ? SliceCategory::kStep : SliceCategory::kPhase, start, end));
        });
  }

  TraceWriter& writer_;
  const NsysExport& file_;
  int64_t shift_ns_;
  int index_;
  const std::map<NsysProcess, const ImportedRank*>& ranks_;
  std::vector<TraceEvent> batch_;
  int64_t events_ = 0;
  mutable int64_t last_ns_ = INT64_MIN;
  mutable int64_t reversed_ = 0;
  std::map<int, int64_t> per_rank_;
};

}  // namespace

StatusOr<NsysRowCounts> write_nsys_rows(TraceWriter& writer, const NsysExport& file,
                                        int64_t shift_ns, int index,
                                        const std::map<NsysProcess, const ImportedRank*>& ranks) {
  RowWriter rows(writer, file, shift_ns, index, ranks);
  RETURN_IF_ERROR(rows.write());
  return NsysRowCounts{rows.events(), rows.last_ns(), rows.events_per_rank(), rows.reversed()};
}

}  // namespace partrain::profiler
