// A launcher's trace of its node: the node's collector and SQLite file (profiler::TraceSession),
// the environment that makes its workers record into it, the run's metadata, each rank's exit and
// the run's final status (completed, failed with the failing rank, or killed).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/rank_tracer.h"
#include "profiler/trace_session.h"
#include "runner/launch/launch_config.h"
#include "runner/launch/supervisor.h"
#include "runner/launch/trace_path.h"
#include "runner/launch/worker_env.h"

namespace partrain::launch {

// A new trace file where `request` says (decide_trace_path's, trace_path.h; its directory made
// first) with its collector, the run's row (start times filled in) already in it, and "tracing
// into PATH" said. A default name that another run of the run id takes meanwhile gives way to
// the next free one. The collector's socket directory is named by `socket_name`. kFailed when
// it cannot be created (`flag`, e.g. "--trace FILE", says how to choose another file named
// with it). Tracing stops when the file would outgrow `max_bytes` (0: no limit) or fills the
// disk (trace_writer.h). `rank_connected` (optional) hears of each rank process that says hello
// to the collector, on its thread.
StatusOr<std::unique_ptr<profiler::TraceSession>> open_run_trace(
    TracePathRequest request, std::string_view flag, const std::string& socket_name,
    const std::string& token, profiler::RunInfo run, uint64_t max_bytes,
    std::function<void(int rank, pid_t pid)> rank_connected = {});
// For the closing "trace: FILE (N events...)" line: "; tracing stopped early (the disk is
// full): N events not stored", or "" when tracing went to the end.
std::string describe_trace_stop(const profiler::TraceSessionStats& stats);
// The closing line, "trace: FILE (N events...)"; a warning instead when the file was removed or
// replaced while the run was traced, as what it recorded is not at that path.
void log_trace_closed(const std::filesystem::path& path, const profiler::TraceSessionStats& stats);

class NodeTrace {
 public:
  // Creates the node's file (decide_trace_path's; its directory too) and starts the collector.
  // Fails with kInvalidArgument when the file exists, kFailed when it cannot be created.
  // `guard_link` (optional) hears of each rank process that says hello to the collector.
  static StatusOr<std::unique_ptr<NodeTrace>> start(
      const LaunchConfig& config, const RunContext& run,
      std::shared_ptr<OrphanGuardLink> guard_link = nullptr);
  // Under an outer `partrain trace` (PARTRAIN_COLLECTOR set): no file of its own; the workers
  // record into the outer collector (their environment already says where), and the launcher
  // adds what only it knows, through a connection of its own: the run's world size and config
  // (filled into the tracer's run row), each rank's exit, the diagnosis. nullptr when the
  // environment names no usable collector.
  static std::unique_ptr<NodeTrace> forward_to_outer(const LaunchConfig& config,
                                                     const RunContext& run);
  ~NodeTrace();

  // PARTRAIN_COLLECTOR and PARTRAIN_COLLECTOR_TOKEN for every worker of this node (none when
  // forwarding: the workers inherit the outer trace's).
  std::vector<std::string> worker_env() const;
  // Exit records of this node's workers and the run's final status; prints where the trace is.
  void finish(const std::vector<WorkerSpec>& specs, const SupervisorResult& result,
              int node_rank, const std::string& host);
  // The launcher's verdict on its ranks' flight-recorder dumps, as a `collective_diagnosis`
  // stat (rank: the culprit, -1 when none is known; description: the first problem).
  void record_diagnosis(std::optional<int> culprit, const std::string& headline);
  // The run could not start (spawn failure): status failed, no failing rank (forwarding: the
  // outer tracer records its command's end).
  void abandon();

 private:
  NodeTrace(std::unique_ptr<profiler::TraceSession> session, std::string token)
      : session_(std::move(session)), token_(std::move(token)) {}
  explicit NodeTrace(std::unique_ptr<profiler::RankTracer> outer) : outer_(std::move(outer)) {}

  void append(const profiler::TraceEvent& event);

  std::unique_ptr<profiler::TraceSession> session_;  // this node's own file, or
  std::unique_ptr<profiler::RankTracer> outer_;      // the connection to an outer trace's
  std::string token_;
};

}  // namespace partrain::launch
