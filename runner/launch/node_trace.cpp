#include "runner/launch/node_trace.h"

#include <fmt/format.h>

#include "core/clock.h"
#include "core/log.h"
#include "profiler/rank_tracer.h"
#include "profiler/trace_open.h"
#include "runner/launch/trace_path.h"

namespace partrain::launch {
namespace fs = std::filesystem;

StatusOr<std::unique_ptr<profiler::TraceSession>> open_run_trace(
    TracePathRequest request, std::string_view flag, const std::string& socket_name,
    const std::string& token, profiler::RunInfo run, uint64_t max_bytes,
    std::function<void(int rank, pid_t pid)> rank_connected) {
  // A default name another run of the same run id took between deciding it and creating it (two
  // runs started at once) moves on to the next free one, as one that was there does.
  constexpr int kTakenNamesSkipped = 100;
  for (int attempt = 0;; ++attempt) {
    ASSIGN_OR_RETURN(const fs::path path, decide_trace_path(request));
    std::error_code error;
    if (path.has_parent_path()) fs::create_directories(path.parent_path(), error);
    if (error) {
      return failed(
          "cannot create the trace directory {}: {}: pass --trace FILE in a directory you can "
          "write, or --no-trace to run without a trace",
          path.parent_path().string(), error.message());
    }
    profiler::TraceSessionOptions options;
    options.path = path;
    options.run_id = socket_name;
    options.token = token;
    options.writer.max_file_bytes = max_bytes;
    options.rank_connected = rank_connected;
    auto session = profiler::TraceSession::start(std::move(options));
    if (!session.is_ok()) {
      const bool taken =
          fs::exists(fs::symlink_status(path, error)) || profiler::writer_alive(path);
      if (!request.file && taken && attempt < kTakenNamesSkipped) {
        request.taken.push_back(path);
        continue;
      }
      // The flag names how to choose another file; a default name's failure is not the flag's.
      return request.file ? session.status().with_context(flag) : session.status();
    }
    run.start_unix_ns = wall_ns();
    run.start_ns = monotonic_ns();  // node 0's clock is the timeline; other nodes' is close
    (*session)->append(run);
    log::info("tracing into {}", path.string());
    return std::move(*session);
  }
}

std::string describe_trace_stop(const profiler::TraceSessionStats& stats) {
  if (stats.stop_reason.empty()) return "";
  return fmt::format("; tracing stopped early ({}): {} events not stored", stats.stop_reason,
                     stats.events_dropped);
}

void log_trace_closed(const fs::path& path, const profiler::TraceSessionStats& stats) {
  if (!stats.file_gone.empty()) {
    log::warn(
        "trace {} was {} while the run was traced: the {} events recorded are not in it "
        "(lost, or in the file it was moved to); trace into a file nothing else removes",
        path.string(), stats.file_gone, stats.events_written);
    return;
  }
  log::info("trace: {} ({} events{}{})", path.string(), stats.events_written,
            stats.records_lost > 0 ? fmt::format(", {} lost", stats.records_lost) : "",
            describe_trace_stop(stats));
}

StatusOr<std::unique_ptr<NodeTrace>> NodeTrace::start(const LaunchConfig& config,
                                                      const RunContext& run,
                                                      std::shared_ptr<OrphanGuardLink> guard_link) {
  profiler::RunInfo info;
  info.run_id = run.run_id;
  info.command = config.trace_command;
  info.config_json = config.trace_config_json;
  info.world_size = run.world_size();
  // The collector's socket directory: one per node, also when two "nodes" share a host.
  const std::string socket_name =
      run.node_rank == 0 ? run.run_id : fmt::format("{}.node{}", run.run_id, run.node_rank);
  ASSIGN_OR_RETURN(
      std::unique_ptr<profiler::TraceSession> session,
      open_run_trace({config.trace_file, run.run_id, run.node_rank}, "--trace FILE (or --no-trace)",
                     socket_name, run.token, std::move(info), config.trace_max_bytes,
                     [guard_link](int, pid_t pid) {
                       if (guard_link) guard_link->watch_process(pid);
                     }));
  return std::unique_ptr<NodeTrace>(new NodeTrace(std::move(session), run.token));
}

std::unique_ptr<NodeTrace> NodeTrace::forward_to_outer(const LaunchConfig& config,
                                                       const RunContext& run) {
  // The connection is attributed to the node's first rank (a collector knows clients by rank).
  std::unique_ptr<profiler::RankTracer> outer =
      profiler::RankTracer::from_env(run.node_rank * run.nproc_per_node);
  if (!outer) return nullptr;
  profiler::RunInfo info;  // only what the tracer's row lacks: its run id and command stay
  info.config_json = config.trace_config_json;
  info.world_size = run.world_size();
  outer->emit(info);
  return std::unique_ptr<NodeTrace>(new NodeTrace(std::move(outer)));
}

NodeTrace::~NodeTrace() = default;

void NodeTrace::append(const profiler::TraceEvent& event) {
  if (session_) {
    session_->append(event);
  } else {
    outer_->emit(event);
  }
}

std::vector<std::string> NodeTrace::worker_env() const {
  if (!session_) return {};
  return {fmt::format("{}={}", profiler::kCollectorEnv, session_->socket_path()),
          fmt::format("{}={}", profiler::kCollectorTokenEnv, token_)};
}

void NodeTrace::finish(const std::vector<WorkerSpec>& specs, const SupervisorResult& result,
                       int node_rank, const std::string& host) {
  for (size_t i = 0; i < specs.size() && i < result.exits.size(); ++i) {
    profiler::RankInfo exit;
    exit.rank = specs[i].rank;
    exit.local_rank = static_cast<int32_t>(i);
    exit.node = node_rank;
    exit.host = host;
    exit.pid = i < result.pids.size() ? result.pids[i] : 0;
    exit.exited = true;
    exit.exit_code = result.exits[i].signaled ? 0 : result.exits[i].value;
    exit.exit_signal = result.exits[i].signaled ? result.exits[i].value : 0;
    append(exit);
  }
  if (!session_) {
    // The outer tracer sets the run's status from its command's exit, but cannot know which
    // rank failed first: said as a stat, which the analyzers read as the run's failing rank.
    if (result.root_cause && !result.stop_signal) {
      profiler::StatEvent failing;
      failing.name = "launch_failing_rank";
      failing.rank = result.root_cause->rank;
      failing.value = result.root_cause->exit_code();
      failing.severity = profiler::StatSeverity::kError;
      failing.description =
          "the rank that failed first, as its launcher saw it (the run's "
          "failing_rank under an outer `partrain trace`)";
      append(failing);
    }
    outer_.reset();  // flushed, goodbye: the outer tracer ends the run when its command does
    return;
  }
  profiler::RunStatus status = profiler::RunStatus::kCompleted;
  std::optional<int> failing_rank;
  if (result.stop_signal) {
    status = profiler::RunStatus::kKilled;
  } else if (result.root_cause) {
    status = profiler::RunStatus::kFailed;
    failing_rank = result.root_cause->rank;
  }
  Status finished = session_->finish(status, failing_rank, monotonic_ns());
  const profiler::TraceSessionStats stats = session_->stats();
  if (!finished.is_ok()) {
    log::error("trace {}: {}", session_->path().string(), finished.message());
  } else {
    log_trace_closed(session_->path(), stats);
  }
}

void NodeTrace::record_diagnosis(std::optional<int> culprit, const std::string& headline) {
  profiler::StatEvent stat;
  stat.name = "collective_diagnosis";
  stat.rank = culprit.value_or(-1);
  stat.value = 1;
  stat.severity = profiler::StatSeverity::kError;
  stat.description = headline;
  append(stat);
}

void NodeTrace::abandon() {
  if (!session_) return;
  Status finished = session_->finish(profiler::RunStatus::kFailed);
  if (!finished.is_ok()) log::error("trace {}: {}", session_->path().string(), finished.message());
}

}  // namespace partrain::launch
