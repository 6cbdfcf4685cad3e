// TraceSession: the collector's consumer decodes each batch from a rank and appends it to the
// node's writer; the writer is shared with the launcher's own appends under one mutex. Problems
// in what arrives are counted into the stat table (docs/trace-format.md, `stats`).
#include "profiler/trace_session.h"

#include <unistd.h>

#include <atomic>
#include <vector>

#include "core/log.h"

namespace partrain::profiler {
namespace {

constexpr std::string_view kDroppedStat = "recorder_dropped_events";
constexpr std::string_view kUndecodableStat = "collector_undecodable_events";
constexpr std::string_view kUncleanStat = "collector_unclean_disconnects";
constexpr std::string_view kRejectedStat = "collector_rejected_clients";
constexpr std::string_view kDrainCutStat = "collector_drain_timeouts";
constexpr std::string_view kForeignStat = "collector_foreign_clients";
constexpr std::string_view kSharedRankStat = "rank_recorded_by_two_processes";

StatEvent stat(std::string_view name, int32_t rank, uint64_t value, StatSeverity severity,
               std::string_view description) {
  return StatEvent{std::string(name), rank, static_cast<int64_t>(value), severity,
                   std::string(description)};
}

// The session's figures that come from the writer.
TraceSessionStats writer_figures(const TraceWriter& writer) {
  TraceSessionStats stats;
  stats.events_written = writer.events_written();
  stats.write_errors = writer.write_errors();
  stats.events_dropped = writer.events_dropped();
  stats.stop_reason = writer.stop_reason();
  stats.file_gone = writer.file_gone();
  return stats;
}

}  // namespace

// Everything the collector's thread and the launcher's thread share. The writer is only touched
// with `mutex` held; the counters are atomics so stats() never waits on a batch being written.
struct TraceSession::Ingest {
  std::mutex mutex;
  std::unique_ptr<TraceWriter> writer;  // null once finish() has closed the file
  TraceSessionStats closed_writer;      // the writer's figures, kept once it is closed
  std::vector<TraceEvent> decoded;      // reused batch to batch (collector thread only)
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> lost{0};
  bool warned_undecodable = false;

  void on_records(int rank, std::span<const uint8_t> records, uint32_t count);
  void on_dropped(int rank, uint64_t count);
  void on_closed(int rank, bool clean);
  void on_rank_shared(int rank, pid_t pid, pid_t other);
  void on_tick();
  void append_locked(std::span<const TraceEvent> events);
  void close_writer();
};

void TraceSession::Ingest::append_locked(std::span<const TraceEvent> events) {
  if (writer) writer->append(events);
}

void TraceSession::Ingest::on_records(int rank, std::span<const uint8_t> records,
                                      uint32_t count) {
  received.fetch_add(count, std::memory_order_relaxed);
  decoded.clear();
  uint64_t undecodable = 0;
  std::string first_error;
  for_each_record(records, [&](std::span<const uint8_t> record) {
    Status status = decode_events_into(record, decoded);
    if (status.is_ok()) return;
    if (first_error.empty()) first_error = status.message();
    ++undecodable;
  });
  if (undecodable > 0) {
    lost.fetch_add(undecodable, std::memory_order_relaxed);
    if (!warned_undecodable) {
      warned_undecodable = true;
      log::warn("trace collector: rank {} sent events that do not decode ({}); they are counted "
                "in stat {}",
                rank, first_error, kUndecodableStat);
    }
    decoded.push_back(stat(kUndecodableStat, rank, undecodable, StatSeverity::kDataLoss,
                           "events from the rank that arrived but could not be decoded"));
  }
  std::lock_guard lock(mutex);
  append_locked(decoded);
}

void TraceSession::Ingest::on_dropped(int rank, uint64_t count) {
  if (count == 0) return;
  lost.fetch_add(count, std::memory_order_relaxed);
  const TraceEvent event =
      stat(kDroppedStat, rank, count, StatSeverity::kDataLoss,
           "events the rank lost before they reached the collector (full recorder buffers, or "
           "batches it could not send)");
  std::lock_guard lock(mutex);
  append_locked(std::span(&event, 1));
}

void TraceSession::Ingest::on_closed(int rank, bool clean) {
  if (clean) return;
  const TraceEvent event =
      stat(kUncleanStat, rank, 1, StatSeverity::kInfo,
           "connections of the rank that ended without a goodbye (the rank crashed or was "
           "killed); events it had not shipped yet are lost");
  std::lock_guard lock(mutex);
  append_locked(std::span(&event, 1));
}

// Their rows mix under one rank (the ranks table keeps the last one's pid) and the other ranks
// they were are missing: said, never silently.
void TraceSession::Ingest::on_rank_shared(int rank, pid_t pid, pid_t other) {
  log::warn(
      "trace collector: processes {} and {} both record as rank {} (neither started the "
      "other): their events mix under that rank; set each process's RANK, or unset an "
      "inherited launcher variable (SLURM_PROCID, RANK) that is not its rank",
      other, pid, rank);
  const TraceEvent event = stat(
      kSharedRankStat, rank, 1, StatSeverity::kDataLoss,
      fmt::format("processes recording as this rank at the same time besides the first (pids {} "
                  "and {}; neither started the other): their events are mixed under one rank, "
                  "and the ranks they were are missing",
                  other, pid));
  std::lock_guard lock(mutex);
  append_locked(std::span(&event, 1));
}

void TraceSession::Ingest::on_tick() {
  std::lock_guard lock(mutex);
  if (writer) writer->commit_if_due();
}

void TraceSession::Ingest::close_writer() {
  std::lock_guard lock(mutex);
  if (!writer) return;
  closed_writer = writer_figures(*writer);
  writer.reset();  // commits, checkpoints the WAL into the file and releases the writer lock
}

StatusOr<std::unique_ptr<TraceSession>> TraceSession::start(TraceSessionOptions options) {
  TraceWriterOptions writer_options = options.writer;
  writer_options.overwrite = options.overwrite;
  ASSIGN_OR_RETURN(std::unique_ptr<TraceWriter> writer,
                   TraceWriter::create(options.path, writer_options));
  std::unique_ptr<TraceSession> session(new TraceSession(std::move(writer), ""));
  Ingest* ingest = session->ingest_.get();
  CollectorConsumer consumer{
      .records = [ingest](int rank, std::span<const uint8_t> records,
                          uint32_t count) { ingest->on_records(rank, records, count); },
      .dropped = [ingest](int rank, uint64_t count) { ingest->on_dropped(rank, count); },
      .closed = [ingest](int rank, bool clean) { ingest->on_closed(rank, clean); },
      .tick = [ingest] { ingest->on_tick(); },
      .hello = std::move(options.rank_connected),
      .rank_shared = [ingest](int rank, pid_t pid,
                              pid_t other) { ingest->on_rank_shared(rank, pid, other); }};
  auto collector = start_collector(options, consumer, session->collector_dir_);
  if (!collector.is_ok()) {
    // Nothing was traced: remove the file so that a retry is not refused as "already exists".
    session.reset();
    std::error_code ignored;
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::filesystem::remove(options.path.string() + suffix, ignored);
    }
    return collector.status().with_context(
        fmt::format("starting the trace collector for {}", options.path.string()));
  }
  session->collector_ = std::move(*collector);
  session->socket_path_ = session->collector_->socket_path();
  return session;
}

// The launchers of one run id on a host share its collector directory, each with a socket of its
// own in it. Another one's session ending removes the directory when it is empty, which it is
// between its making here and this socket's bind: made again then. A directory this session
// made and could not use is removed; one that was there is another run's to remove.
StatusOr<std::unique_ptr<Collector>> TraceSession::start_collector(
    const TraceSessionOptions& options, const CollectorConsumer& consumer, std::string& dir) {
  constexpr int kAttempts = 3;
  for (int attempt = 1;; ++attempt) {
    std::error_code error;
    const std::string shared = collector_base_dir() + "/" + options.run_id;
    const bool existed = std::filesystem::exists(shared, error);
    ASSIGN_OR_RETURN(dir, make_collector_dir(options.run_id));
    // One socket per launcher: the launchers of a run's nodes share the run id, and several of
    // them may run on one host (a multi-node run tried out on one machine).
    CollectorOptions collector_options{
        .socket_path = fmt::format("{}/collector-{}.sock", dir, ::getpid()),
        .token = options.token,
        .limits = options.limits};
    auto collector = Collector::start(std::move(collector_options), consumer);
    if (collector.is_ok()) return collector;
    if (!std::filesystem::exists(dir, error) && attempt < kAttempts) continue;
    if (!existed || dir != shared) std::filesystem::remove(dir, error);  // a fallback is ours
    dir.clear();
    return collector.status();
  }
}

TraceSession::TraceSession(std::unique_ptr<TraceWriter> writer, std::string collector_dir)
    : ingest_(std::make_unique<Ingest>()), collector_dir_(std::move(collector_dir)) {
  path_ = writer->path();
  ingest_->writer = std::move(writer);
}

TraceSession::~TraceSession() {
  // Without finish(): no drain (the launcher is unwinding), the status stays as it is.
  collector_.reset();
  ingest_->close_writer();
  std::error_code ignored;
  if (!collector_dir_.empty()) std::filesystem::remove(collector_dir_, ignored);  // empty now
}

const std::string& TraceSession::socket_path() const { return socket_path_; }
const std::filesystem::path& TraceSession::path() const { return path_; }

void TraceSession::append(const TraceEvent& event) {
  std::lock_guard lock(ingest_->mutex);
  if (!ingest_->writer) {
    log::debug("trace {}: an event appended after finish() is ignored", path_.string());
    return;
  }
  ingest_->append_locked(std::span(&event, 1));
}

void TraceSession::stop_collector(std::chrono::milliseconds drain_timeout) {
  if (!collector_) return;
  const CollectorDrainResult drained = collector_->drain(drain_timeout);
  const CollectorStats collector_stats = collector_->stats();
  collector_.reset();
  std::vector<TraceEvent> stats;
  if (drained.cut > 0) {
    log::warn("trace {}: {} rank connection(s) still open {} ms after the run ended were closed "
              "unread",
              path_.string(), drained.cut, drain_timeout.count());
    stats.push_back(stat(kDrainCutStat, -1, drained.cut, StatSeverity::kDataLoss,
                         "rank connections still open when the collector stopped; what they had "
                         "not sent yet is lost"));
  }
  if (const uint64_t ranks = collector_stats.rejected - collector_stats.rejected_unidentified;
      ranks > 0) {
    stats.push_back(stat(kRejectedStat, -1, static_cast<int64_t>(ranks), StatSeverity::kDataLoss,
                         "ranks' connections cut off for a bad frame (version, size or order); "
                         "their events from then on are not in the trace"));
  }
  if (collector_stats.rejected_unidentified > 0) {
    // Nothing of a rank's came through them: no loss unless a rank had the wrong token (it is
    // then absent from the trace, and its own stderr says so).
    stats.push_back(stat(kForeignStat, -1,
                         static_cast<int64_t>(collector_stats.rejected_unidentified),
                         StatSeverity::kInfo,
                         "clients cut off before a valid HELLO (not a partrain frame, or the "
                         "wrong token or version): no rank's events came through them"));
  }
  std::lock_guard lock(ingest_->mutex);
  ingest_->append_locked(stats);
}

Status TraceSession::finish(RunStatus status, std::optional<int> failing_rank,
                            std::optional<int64_t> end_ns,
                            std::chrono::milliseconds drain_timeout) {
  std::lock_guard finish_lock(finish_mutex_);
  if (finished_) return finish_status_;
  finished_ = true;
  stop_collector(drain_timeout);
  {
    std::lock_guard lock(ingest_->mutex);
    if (ingest_->writer) {
      finish_status_ = ingest_->writer->set_run_status(status, failing_rank, end_ns);
    }
  }
  ingest_->close_writer();
  std::error_code ignored;
  std::filesystem::remove(collector_dir_, ignored);
  return finish_status_;
}

TraceSessionStats TraceSession::stats() const {
  std::unique_lock lock(ingest_->mutex);
  TraceSessionStats stats =
      ingest_->writer ? writer_figures(*ingest_->writer) : ingest_->closed_writer;
  lock.unlock();
  stats.records_received = ingest_->received.load(std::memory_order_relaxed);
  stats.records_lost = ingest_->lost.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace partrain::profiler
