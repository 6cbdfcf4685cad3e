#include "runner/launch/traced_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "core/share_dir.h"
#include "core/subprocess.h"
#include "profiler/flight/collective_watchdog.h"
#include "profiler/flight/flight_dumper.h"
#include "profiler/gpu_counter_sampler.h"
#include "profiler/gpu_trace_level.h"
#include "profiler/rank_gpu_counters.h"
#include "profiler/rank_tracer.h"
#include "profiler/step_marker.h"
#include "profiler/trace_session.h"
#include "runner/launch/flight_diagnosis.h"
#include "runner/launch/flight_dump_dir.h"
#include "runner/launch/injection_links.h"
#include "runner/launch/node_trace.h"
#include "runner/launch/orphan_guard.h"
#include "runner/launch/run_identity.h"
#include "runner/launch/signal_channel.h"
#include "runner/launch/stale_launcher_dirs.h"
#include "runner/launch/trace_path.h"
#include "runner/launch/worker_env.h"

namespace partrain::launch {
namespace {
namespace fs = std::filesystem;

// The command's environment: ours minus what an outer tracer set, plus the collector and the
// injection (add_injection_environment).
std::vector<std::string> traced_environment(const profiler::TraceSession& session,
                                            const std::string& token, const std::string& run_id,
                                            const TracedCommandConfig& config,
                                            const FlightDumpDir* flight,
                                            const InjectionPaths& injection) {
  std::vector<std::string> env;
  auto replaced = [&](const std::string& variable) {
    return std::any_of(config.extra_env.begin(), config.extra_env.end(), [&](const auto& extra) {
      const size_t name = extra.find('=');
      return variable.compare(0, name + 1, extra, 0, name + 1) == 0;
    });
  };
  for (std::string& variable : current_environment()) {
    if (replaced(variable)) continue;
    if (variable.rfind("PARTRAIN_COLLECTOR", 0) != 0 &&
        variable.rfind("PARTRAIN_RUN_ID=", 0) != 0 &&
        variable.rfind("PARTRAIN_STEP_MARKER=", 0) != 0 &&
        variable.rfind("PARTRAIN_NVML_INTERVAL=", 0) != 0 &&
        variable.rfind("PARTRAIN_FLIGHT_DIR=", 0) != 0 &&
        variable.rfind("PARTRAIN_COLLECTIVE_TIMEOUT=", 0) != 0 &&
        variable.rfind("CUDA_INJECTION64_PATH=", 0) != 0) {
      env.push_back(std::move(variable));
    }
  }
  env.insert(env.end(), config.extra_env.begin(), config.extra_env.end());
  if (flight != nullptr) env.push_back(flight->worker_env());
  if (config.collective_timeout) {
    env.push_back(fmt::format("{}={}ns", profiler::kCollectiveTimeoutEnv,
                              config.collective_timeout->count()));
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
  add_injection_environment(env, injection);
  return env;
}

// The value of `name` in `env` ("NAME=value" entries), and where it is.
std::vector<std::string>::iterator find_variable(std::vector<std::string>& env,
                                                 std::string_view name) {
  return std::find_if(env.begin(), env.end(), [&](const std::string& variable) {
    return variable.size() > name.size() && variable.compare(0, name.size(), name) == 0 &&
           variable[name.size()] == '=';
  });
}

// Sets `name` to `value` in `env`, or, with a separator, puts `value` in front of what is there.
void set_variable(std::vector<std::string>& env, std::string_view name, const std::string& value,
                  std::string_view separator = {}) {
  auto found = find_variable(env, name);
  if (found == env.end()) {
    env.push_back(fmt::format("{}={}", name, value));
    return;
  }
  const std::string old = found->substr(name.size() + 1);
  if (separator.empty() || old.empty()) {
    *found = fmt::format("{}={}", name, value);
  } else if (old != value && !old.starts_with(value + std::string(separator))) {
    *found = fmt::format("{}={}{}{}", name, value, separator, old);  // else: first already
  }
}

// Supervises the command: forwards the stop signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT) and the
// job's own (SIGUSR1, SIGUSR2) to its process group, reaps it.
ExitStatus supervise(Subprocess& child, SignalChannel& signals, std::optional<int>& stop_signal) {
  while (true) {
    if (std::optional<ExitStatus> exit = child.try_reap()) return *exit;
    pollfd entry{signals.fd(), POLLIN, 0};
    ::poll(&entry, 1, 200);
    for (int signal : signals.drain()) {
      if (is_stop_signal(signal)) stop_signal = signal;
      if (is_stop_signal(signal) || is_passed_on(signal)) (void)child.signal_group(signal);
    }
  }
}

// The ranks' flight-recorder dumps once the command has ended (torchrun stops the other ranks
// when one exits; they dump as they stop): each torchrun attempt's apart (a restarted rank dumps
// again, and a hang in one attempt is read from that attempt's dumps alone), diagnosed on stderr
// and in the trace when they call for it. Whether a rank's watchdog fired in the last attempt
// that dumped: the one whose end ended the command.
bool diagnose_command(const FlightDumpDir& flight, profiler::TraceSession& session) {
  const std::vector<std::vector<profiler::FlightDump>> attempts = dumps_by_attempt(flight.read());
  const bool restarted = !attempts.empty() && attempts.back().front().attempt > 0;
  // The trace's stats add up per (name, rank): the attempts that blame one rank share a row,
  // their statements joined, lest a later attempt's replace an earlier one's.
  std::map<int, std::vector<std::string>> statements;
  bool watchdog_fired = false;
  for (const std::vector<profiler::FlightDump>& dumps : attempts) {
    watchdog_fired = false;
    if (!diagnosis_called_for(dumps)) continue;
    const int attempt = dumps.front().attempt;
    const FlightDiagnosis diagnosis = diagnose_flight_dumps(dumps);
    std::string text = format_flight_diagnosis(diagnosis);
    std::string statement = diagnosis_statement(diagnosis);
    if (restarted) {
      text =
          fmt::format("partrain: flight recorder: attempt {} (TORCHELASTIC_RESTART_COUNT={}):\n{}",
                      attempt, attempt, text);
      statement = fmt::format("attempt {}: {}", attempt, statement);
    }
    std::fwrite(text.data(), 1, text.size(), stderr);
    statements[diagnosis.culprit.value_or(-1)].push_back(std::move(statement));
    watchdog_fired = !diagnosis.watchdog_ranks.empty();
  }
  for (const auto& [culprit, said] : statements) {
    profiler::StatEvent stat;
    stat.name = "collective_diagnosis";
    stat.rank = culprit;
    stat.value = static_cast<int64_t>(said.size());
    stat.severity = profiler::StatSeverity::kError;
    stat.description = fmt::format("{}", fmt::join(said, "; "));
    session.append(stat);
  }
  return watchdog_fired;
}

}  // namespace

InjectionPaths find_injection() {
  InjectionPaths paths{injection_library(), python_module_dir()};
  if (!paths.library) {
    log::warn("libpartrain_inject.so is not installed beside this partrain: only processes that "
              "record themselves (partrain workers) are traced");
  }
  if (!paths.python_module) {
    log::warn("partrain's Python module (share/partrain/python) is not installed beside this "
              "partrain: PyTorch's collectives are recorded only where they call NCCL");
  }
  return paths;
}

void add_injection_environment(std::vector<std::string>& env, const InjectionPaths& paths) {
  // The command started by this process is a rank even when RANK came from outside, set for us
  // too (profiler/inject/injected_process.cpp).
  set_variable(env, "PARTRAIN_TRACER_PID", std::to_string(::getpid()));
  // The mark a traced rank leaves for the processes it starts (partrain_torch): this command's
  // processes are ranks of this run, even when a rank of another one started partrain.
  if (auto mark = find_variable(env, "PARTRAIN_GROUPS_PID"); mark != env.end()) env.erase(mark);
  if (paths.library) {
    set_variable(env, "LD_PRELOAD", *paths.library, " ");
    set_variable(env, "CUDA_INJECTION64_PATH", *paths.library);
    // The user's own NVTX tool wins: one per process.
    if (find_variable(env, "NVTX_INJECTION64_PATH") == env.end()) {
      set_variable(env, "NVTX_INJECTION64_PATH", *paths.library);
    }
    // A --gpu-trace level loads partrain's NCCL profiler plugin, unless the user's holds NCCL's
    // one slot (the CLI said what that costs).
    if (find_variable(env, profiler::kGpuTraceEnv) != env.end() &&
        find_variable(env, "NCCL_PROFILER_PLUGIN") == env.end()) {
      set_variable(env, "NCCL_PROFILER_PLUGIN", *paths.library);
    }
  }
  if (paths.python_module) set_variable(env, "PYTHONPATH", *paths.python_module, ":");
}

std::optional<std::string> python_module_dir() {
  StatusOr<fs::path> share = find_share_dir();
  if (!share.is_ok()) return std::nullopt;
  const fs::path dir = *share / "python";
  std::error_code error;
  if (!fs::exists(dir / "sitecustomize.py", error)) return std::nullopt;
  return dir.string();
}

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
  // Held until the command ends (its links); a refusal leaves no trace either.
  ASSIGN_OR_RETURN(const InjectionLinks injection, InjectionLinks::make(find_injection()));
  remove_stale_launcher_dirs();
  ASSIGN_OR_RETURN(SignalChannel signals, SignalChannel::open());
  std::string run_id = config.run_id.value_or(env::get("PARTRAIN_RUN_ID").value_or(""));
  if (run_id.empty()) {
    ASSIGN_OR_RETURN(run_id, new_run_id());
  }
  ASSIGN_OR_RETURN(std::string token, random_token());
  // The command dies with the tracer (PR_SET_PDEATHSIG); its own children too, through the guard,
  // forked before the command as the launcher's is: started after it, a tracer killed while the
  // guard's fork was still under way (a loaded machine) left the command's children running.
  // The guard also takes each rank process the collector hears from: a launcher's workers in
  // sessions of their own (torchrun's) are out of the command's group. It outlives the session,
  // whose collector thread tells it of them.
  std::optional<OrphanGuard> guard;
  if (auto started = OrphanGuard::start(); started.is_ok()) {
    guard.emplace(std::move(started).value());
  } else {
    log::warn("{}: the command's own children would outlive a tracer killed by SIGKILL",
              started.status().message());
  }
  OrphanGuard* const rank_guard = guard ? &*guard : nullptr;
  // Whether any process of the command became a rank (the collector's thread says so): a trace
  // of none holds nothing, which the run's end says.
  std::atomic<bool> rank_connected{false};
  profiler::RunInfo info;
  info.run_id = run_id;
  info.command = config.command_line;
  info.config_json = "{}";
  ASSIGN_OR_RETURN(
      std::unique_ptr<profiler::TraceSession> session,
      open_run_trace({config.output, run_id, 0}, "--trace FILE", run_id, token, std::move(info),
                     config.max_bytes, [rank_guard, &rank_connected](int, pid_t pid) {
                       rank_connected.store(true);
                       if (rank_guard != nullptr) rank_guard->watch_process(pid);
                     }));

  // Where the ranks dump their flight recorders; without it they still dump into the trace.
  std::optional<FlightDumpDir> flight;
  if (auto created = FlightDumpDir::create(); created.is_ok()) {
    flight.emplace(std::move(*created));
  } else {
    log::warn("{}; no flight-recorder diagnosis for this run", created.status().message());
  }
  auto child =
      Subprocess::spawn({config.command,
                         traced_environment(*session, token, run_id, config,
                                            flight ? &*flight : nullptr, injection.paths()),
                         /*capture_output=*/false});
  if (!child.is_ok()) {
    (void)session->finish(profiler::RunStatus::kFailed);
    return child.status();
  }
  if (guard) guard->watch(child->pid());
  std::optional<int> stop_signal;
  const ExitStatus exit = supervise(*child, signals, stop_signal);
  if (guard) guard->dismiss();
  const bool watchdog_fired = flight && diagnose_command(*flight, *session);
  const profiler::RunStatus status = stop_signal     ? profiler::RunStatus::kKilled
                                     : exit.success() ? profiler::RunStatus::kCompleted
                                                      : profiler::RunStatus::kFailed;
  const fs::path path = session->path();
  if (Status finished = session->finish(status, std::nullopt, monotonic_ns()); !finished.is_ok()) {
    log::error("trace {}: {}", path.string(), finished.message());
  }
  const profiler::TraceSessionStats stats = session->stats();
  log_trace_closed(path, stats);
  if (!rank_connected.load()) {
    log::warn(
        "no process of the command became a rank, so the trace holds no collectives and no "
        "steps: partrain records a process as a rank when its launcher gives it one (RANK and "
        "WORLD_SIZE: torchrun, accelerate launch of several processes) or when it calls "
        "torch.distributed.init_process_group (`partrain analyze {}` says more)",
        path.string());
  }
  if (stop_signal) return exit_code_for_signal(*stop_signal);
  // torchrun exits 1 whatever ended its ranks: a hang the watchdog ended is a timeout.
  if (watchdog_fired && !exit.success()) return 124;
  return exit.exit_code();
}

}  // namespace partrain::launch
