// One node's trace, live: the collector that the node's ranks send their events to and the single
// SQLite writer of the node's file, joined. Used by `partrain launch` (each node's launcher) and
// `partrain trace`. Problems in the incoming data (undecodable batches, ranks' drops) become rows
// of the stat table, never errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/status.h"
#include "profiler/collector.h"
#include "profiler/trace_event.h"
#include "profiler/trace_writer.h"

namespace partrain::profiler {

struct TraceSessionOptions {
  std::filesystem::path path;  // the node's trace file
  bool overwrite = false;
  std::string run_id;  // names the collector directory (make_collector_dir)
  std::string token;   // every client frame must carry it
  TraceWriterOptions writer;
  CollectorLimits limits;
  // Optional, on the collector's thread: a rank's process said hello (CollectorConsumer::hello).
  std::function<void(int rank, pid_t pid)> rank_connected = {};
};

struct TraceSessionStats {
  uint64_t events_written = 0;    // events handed to the writer (the launcher's own included)
  uint64_t records_received = 0;  // records that arrived from ranks
  uint64_t records_lost = 0;      // dropped by ranks + undecodable on arrival
  uint64_t write_errors = 0;      // events the writer could not store
  // Why tracing stopped early (a full disk: trace_writer.h), empty if it did not; and the events
  // not stored since.
  std::string stop_reason;
  uint64_t events_dropped = 0;
  // What became of the file if its path no longer names it (TraceWriter::file_gone), else empty.
  std::string file_gone;
};

class TraceSession {
 public:
  // Creates the file (TraceWriter::create) and starts the collector on
  // <make_collector_dir(run_id)>/collector-<pid>.sock (the nodes of a run share its run id, and
  // two of their launchers may share a host).
  static StatusOr<std::unique_ptr<TraceSession>> start(TraceSessionOptions options);
  // Without finish(): stops the collector and commits, leaving the run status as it is (a reader
  // then marks the run incomplete).
  ~TraceSession();
  TraceSession(const TraceSession&) = delete;
  TraceSession& operator=(const TraceSession&) = delete;

  // What workers get as PARTRAIN_COLLECTOR.
  const std::string& socket_path() const;
  const std::filesystem::path& path() const;

  // Thread-safe; for the launcher's own events (RunInfo, a rank's exit RankInfo, StatEvents).
  // Ignored after finish().
  void append(const TraceEvent& event);

  // Reads every connected client to EOF (they have exited by now; bounded by drain_timeout),
  // stops the collector, stores the final status and commits. Idempotent: a second call returns
  // the first call's result and changes nothing.
  Status finish(RunStatus status, std::optional<int> failing_rank = std::nullopt,
                std::optional<int64_t> end_ns = std::nullopt,
                std::chrono::milliseconds drain_timeout = std::chrono::seconds(5));

  TraceSessionStats stats() const;

 private:
  struct Ingest;  // the collector's consumer: decodes batches into the writer
  TraceSession(std::unique_ptr<TraceWriter> writer, std::string collector_dir);
  void stop_collector(std::chrono::milliseconds drain_timeout);
  // The collector, its socket in the run's directory (`dir`: set to it, or left empty).
  static StatusOr<std::unique_ptr<Collector>> start_collector(const TraceSessionOptions& options,
                                                              const CollectorConsumer& consumer,
                                                              std::string& dir);

  std::unique_ptr<Ingest> ingest_;  // owns the writer; shared with the collector's thread
  std::unique_ptr<Collector> collector_;
  std::string collector_dir_;
  std::string socket_path_;
  std::filesystem::path path_;
  std::mutex finish_mutex_;
  bool finished_ = false;
  Status finish_status_;
};

}  // namespace partrain::profiler
