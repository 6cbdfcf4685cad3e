#include "runner/launch/traced_command.h"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "core/subprocess.h"
#include "profiler/gpu_counter_sampler.h"
#include "profiler/rank_gpu_counters.h"
#include "profiler/rank_tracer.h"
#include "profiler/step_marker.h"
#include "profiler/trace_session.h"
#include "runner/launch/node_trace.h"
#include "runner/launch/orphan_guard.h"
#include "runner/launch/run_identity.h"
#include "runner/launch/signal_channel.h"
#include "runner/launch/stale_launcher_dirs.h"
#include "runner/launch/worker_env.h"

namespace partrain::launch {
namespace {
namespace fs = std::filesystem;

// The command's environment: ours, plus the collector and the injection library (prepended to
// any LD_PRELOAD the user set).
std::vector<std::string> traced_environment(const profiler::TraceSession& session,
                                            const std::string& token, const std::string& run_id,
                                            const TracedCommandConfig& config) {
  std::vector<std::string> env;
  std::optional<std::string> preload;
  bool user_nvtx_tool = false;  // the user's own NVTX_INJECTION64_PATH wins: one tool per process
  for (std::string& variable : current_environment()) {
    if (variable.rfind("LD_PRELOAD=", 0) == 0) {
      preload = variable.substr(11);
    } else if (variable.rfind("PARTRAIN_COLLECTOR", 0) != 0 &&
               variable.rfind("PARTRAIN_RUN_ID=", 0) != 0 &&
               variable.rfind("PARTRAIN_STEP_MARKER=", 0) != 0 &&
               variable.rfind("PARTRAIN_NVML_INTERVAL=", 0) != 0 &&
               variable.rfind("CUDA_INJECTION64_PATH=", 0) != 0) {
      user_nvtx_tool = user_nvtx_tool || variable.rfind("NVTX_INJECTION64_PATH=", 0) == 0;
      env.push_back(std::move(variable));
    }
  }
  if (config.step_marker) {
    env.push_back(fmt::format("{}={}", profiler::kStepMarkerEnv, *config.step_marker));
  }
  if (config.nvml_interval) {
    env.push_back(fmt::format("{}={}", profiler::kNvmlIntervalEnv, *config.nvml_interval));
  }
  env.push_back(fmt::format("{}={}", profiler::kCollectorEnv, session.socket_path()));
  env.push_back(fmt::format("{}={}", profiler::kCollectorTokenEnv, token));
  env.push_back("PARTRAIN_RUN_ID=" + run_id);
  env.push_back(fmt::format("PARTRAIN_TRACER_PID={}", ::getpid()));
  if (std::optional<std::string> library = injection_library()) {
    env.push_back("LD_PRELOAD=" + *library + (preload && !preload->empty() ? " " + *preload : ""));
    env.push_back("CUDA_INJECTION64_PATH=" + *library);
    if (!user_nvtx_tool) env.push_back("NVTX_INJECTION64_PATH=" + *library);
  } else {
    if (preload) env.push_back("LD_PRELOAD=" + *preload);
    log::warn("libpartrain_inject.so is not installed beside this partrain: only processes that "
              "record themselves (partrain workers) are traced");
  }
  return env;
}

// Supervises the command: forwards SIGINT/SIGTERM/SIGHUP to its process group, reaps it.
ExitStatus supervise(Subprocess& child, SignalChannel& signals, std::optional<int>& stop_signal) {
  while (true) {
    if (std::optional<ExitStatus> exit = child.try_reap()) return *exit;
    pollfd entry{signals.fd(), POLLIN, 0};
    ::poll(&entry, 1, 200);
    for (int signal : signals.drain()) {
      if (signal == SIGINT || signal == SIGTERM || signal == SIGHUP) {
        stop_signal = signal;
        (void)child.signal_group(signal);
      }
    }
  }
}

}  // namespace

std::optional<std::string> injection_library() {
  std::error_code error;
  fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error) return std::nullopt;
  for (const fs::path& candidate : {exe.parent_path().parent_path() / "lib" / "libpartrain_inject.so",
                                    exe.parent_path() / "libpartrain_inject.so"}) {
    if (fs::exists(candidate, error)) return candidate.string();
  }
  return std::nullopt;
}

StatusOr<int> run_traced_command(const TracedCommandConfig& config) {
  if (config.step_marker) RETURN_IF_ERROR(profiler::StepMarker::compile(*config.step_marker).status());
  if (config.nvml_interval) {
    RETURN_IF_ERROR(profiler::parse_nvml_interval(*config.nvml_interval).status());
  }
  if (config.command.empty()) {
    return invalid_argument("no command to trace: pass it after `--`, e.g. "
                            "`partrain trace -- torchrun --nproc-per-node 4 train.py`");
  }
  // A command that cannot start leaves no trace behind (a second try would find it there).
  RETURN_IF_ERROR(Subprocess::check_runnable(config.command.front(), current_environment()));
  remove_stale_launcher_dirs();
  ASSIGN_OR_RETURN(SignalChannel signals, SignalChannel::open());
  std::string run_id = env::get("PARTRAIN_RUN_ID").value_or("");
  if (run_id.empty()) {
    ASSIGN_OR_RETURN(run_id, new_run_id());
  }
  ASSIGN_OR_RETURN(std::string token, random_token());
  const fs::path path = config.output ? fs::path(*config.output) : default_trace_path(run_id);
  profiler::RunInfo info;
  info.run_id = run_id;
  info.command = config.command_line;
  info.config_json = "{}";
  ASSIGN_OR_RETURN(std::unique_ptr<profiler::TraceSession> session,
                   open_run_trace(path, "-o FILE", run_id, token, std::move(info),
                                  config.max_bytes));

  auto child = Subprocess::spawn({config.command, traced_environment(*session, token, run_id, config),
                                  /*capture_output=*/false});
  if (!child.is_ok()) {
    (void)session->finish(profiler::RunStatus::kFailed);
    return child.status();
  }
  // The command dies with the tracer (PR_SET_PDEATHSIG); its own children too, through the guard.
  std::optional<OrphanGuard> guard;
  if (auto started = OrphanGuard::start(); started.is_ok()) {
    guard.emplace(std::move(started).value());
    guard->watch(child->pid());
  }
  std::optional<int> stop_signal;
  const ExitStatus exit = supervise(*child, signals, stop_signal);
  if (guard) guard->dismiss();
  const profiler::RunStatus status = stop_signal     ? profiler::RunStatus::kKilled
                                     : exit.success() ? profiler::RunStatus::kCompleted
                                                      : profiler::RunStatus::kFailed;
  if (Status finished = session->finish(status, std::nullopt, monotonic_ns()); !finished.is_ok()) {
    log::error("trace {}: {}", path.string(), finished.message());
  }
  const profiler::TraceSessionStats stats = session->stats();
  log::info("trace: {} ({} events{})", path.string(), stats.events_written,
            describe_trace_stop(stats));
  if (stop_signal) return exit_code_for_signal(*stop_signal);
  return exit.exit_code();
}

}  // namespace partrain::launch
