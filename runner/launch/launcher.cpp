#include "runner/launch/launcher.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/log.h"
#include "profiler/collector.h"
#include "profiler/flight/flight_dumper.h"
#include "profiler/rank_tracer.h"
#include "runner/launch/cluster_env.h"
#include "runner/launch/flight_diagnosis.h"
#include "runner/launch/flight_dump_dir.h"
#include "runner/launch/injection_links.h"
#include "runner/launch/node_rendezvous.h"
#include "runner/launch/node_trace.h"
#include "runner/launch/run_identity.h"
#include "runner/launch/signal_channel.h"
#include "runner/launch/stale_launcher_dirs.h"
#include "runner/launch/supervisor.h"
#include "runner/launch/token_file.h"
#include "runner/launch/traced_command.h"
#include "runner/launch/worker_env.h"
#include "runner/worker/cpu_binding.h"

namespace partrain::launch {
namespace {

constexpr uint16_t kDefaultMultiNodePort = 29500;  // torchrun's default

Status validate(const LaunchConfig& config) {
  if (config.nproc_per_node < 1) {
    return invalid_argument("--nproc-per-node must be at least 1, got {}", config.nproc_per_node);
  }
  if (config.command.empty()) {
    return invalid_argument("no worker command: pass it after `--`, e.g. "
                            "`partrain launch -n 4 -- python3 train.py`");
  }
  if (config.grace.count() < 0) return invalid_argument("--grace must not be negative");
  return Status::ok();
}

// A host name that resolves to a loopback address here (Debian maps its own name to 127.0.1.1)
// makes a store the other nodes cannot reach: said before they time out.
void warn_if_loopback_only(const std::string& master_addr) {
  if (master_addr == "127.0.0.1" || master_addr == "localhost" || master_addr == "::1") return;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(master_addr.c_str(), nullptr, &hints, &found) != 0) return;
  bool loopback = found != nullptr;
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      loopback = loopback && (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    } else if (ai->ai_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      loopback = loopback && IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
    }
  }
  ::freeaddrinfo(found);
  if (loopback) {
    log::warn("--master-addr {} is a loopback address on this host, which other hosts cannot "
              "reach: pass node 0's network address, or --rdzv-bind-all",
              master_addr);
  }
}

// Flags win; then what a cluster engine (Slurm, Open MPI, PMI) says; then a single node.
StatusOr<RendezvousPlan> plan_rendezvous(const LaunchConfig& config) {
  ASSIGN_OR_RETURN(NodePlacement placement,
                   place_node({config.nnodes, config.node_rank, config.master_addr},
                              ClusterProbe::of_process()));
  RendezvousPlan plan;
  plan.nnodes = placement.nnodes;
  plan.node_rank = placement.node_rank;
  plan.master_addr = placement.master_addr;
  plan.master_port = config.master_port.value_or(plan.nnodes > 1 ? kDefaultMultiNodePort : 0);
  if (plan.nnodes > 1 && plan.master_port == 0) {
    return invalid_argument("--master-port 0 (a free port) works on one node only: the other "
                            "nodes must know node 0's port");
  }
  // The store listens where the workers are told to find it, not on every interface.
  plan.bind_host = config.rdzv_bind_all ? "0.0.0.0" : plan.master_addr;
  if (plan.nnodes > 1 && plan.node_rank == 0 && !config.rdzv_bind_all) {
    warn_if_loopback_only(plan.master_addr);
  }
  plan.nproc_per_node = config.nproc_per_node;
  // What the nodes' workers must agree on: not what is a node's own (its output, its BLAS
  // threads and their binding, its peak for MFU, where it keeps the data).
  constexpr std::string_view kWorkload = "PARTRAIN_WORKLOAD_CONFIG=";
  for (const std::string& variable : config.extra_env) {
    if (!variable.starts_with(kWorkload)) continue;
    nlohmann::json workload =
        nlohmann::json::parse(variable.substr(kWorkload.size()), nullptr, false);
    if (workload.is_object()) {
      for (const char* own : {"json", "blas_threads", "cpu_bind", "peak_flops", "data"}) {
        workload.erase(own);
      }
    }
    plan.workload = workload.dump();
  }
  plan.timeout = config.rdzv_timeout;
  plan.rdzv_id = config.rdzv_id;
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  plan.host = host.data();
  return plan;
}

// The multi-node secret: --token (PARTRAIN_TOKEN) or --token-file. One derived from public
// values (the old default came from --rdzv-id) would let anyone who reaches the port in.
StatusOr<std::string> choose_token(const LaunchConfig& config, const RendezvousPlan& plan,
                                   const InterruptCheck& interrupted) {
  const bool given = config.token && !config.token->empty();
  if (given && config.token_file) {
    return invalid_argument("pass --token (PARTRAIN_TOKEN) or --token-file, not both");
  }
  if (given) {
    if (plan.nnodes > 1 && *config.token == config.rdzv_id) {
      return invalid_argument(
          "--token is the same as --rdzv-id, which every worker's environment and the command "
          "line show: give a secret of its own, e.g. `export PARTRAIN_TOKEN=$(openssl rand -hex "
          "16)`");
    }
    return *config.token;
  }
  if (config.token_file) {
    return token_from_file(*config.token_file, plan.node_rank == 0, plan.timeout, interrupted);
  }
  if (plan.nnodes == 1) return random_token();
  return invalid_argument(
      "{} nodes need a shared secret for the rendezvous store, or anyone who can reach {}:{} "
      "could join the run: give every node the same --token (or PARTRAIN_TOKEN, e.g. `export "
      "PARTRAIN_TOKEN=$(openssl rand -hex 16)` in the job script before srun / mpirun -x "
      "PARTRAIN_TOKEN), or --token-file FILE in a directory every node shares (node 0 writes a "
      "random one there)",
      plan.nnodes, plan.master_addr, plan.master_port);
}

Status choose_identity(const LaunchConfig& config, RendezvousPlan& plan,
                       const InterruptCheck& interrupted) {
  ASSIGN_OR_RETURN(plan.token, choose_token(config, plan, interrupted));
  if (config.run_id) {
    const std::string& id = *config.run_id;
    if (Status checked = profiler::check_run_id(id); !checked.is_ok()) {
      return invalid_argument("--run-id {}, or leave it out for a generated one",
                              checked.message());
    }
    plan.run_id = id;
  } else {
    ASSIGN_OR_RETURN(plan.run_id, new_run_id());
  }
  return Status::ok();
}

std::vector<WorkerSpec> worker_specs(const LaunchConfig& config, const RunContext& run) {
  const std::vector<std::string> base = current_environment();
  std::vector<std::string> strip = config.strip_env;
  for (const std::string& variable : config.extra_env) {
    strip.push_back(variable.substr(0, variable.find('=')));
  }
  std::vector<WorkerSpec> specs;
  for (int local = 0; local < run.nproc_per_node; ++local) {
    std::vector<std::string> env = worker_environment(base, strip, run, local);
    env.insert(env.end(), config.extra_env.begin(), config.extra_env.end());
    const int rank = run.global_rank(local);
    std::string error_file =
        run.error_file_dir.empty() ? std::string() : error_file_path(run.error_file_dir, rank);
    specs.push_back(WorkerSpec{rank, config.command, std::move(env), std::move(error_file)});
  }
  return specs;
}

// The node's trace, unless tracing is off or an outer `partrain trace` collects already.
StatusOr<std::unique_ptr<NodeTrace>> start_trace(const LaunchConfig& config, const RunContext& run,
                                                 std::shared_ptr<OrphanGuardLink> guard_link) {
  if (!config.trace) return std::unique_ptr<NodeTrace>();
  if (auto outer = env::get(profiler::kCollectorEnv); outer && !outer->empty()) {
    log::info("workers record into the collector of an outer `partrain trace` ({})", *outer);
    return NodeTrace::forward_to_outer(config, run);
  }
  return NodeTrace::start(config, run, std::move(guard_link));
}

// The flight-recorder diagnosis, printed when the dumps call for one. With several nodes, node
// 0's has every node's dumps; the others' only their own, and they say so.
// What the launcher saw of each rank's process goes with the dumps: a rank stopped or stuck in
// the kernel has no dump of its own to say so.
std::optional<FlightDiagnosis> diagnose_run(const std::vector<profiler::FlightDump>& dumps,
                                            const std::vector<RankProcess>& processes,
                                            bool other_nodes_elsewhere) {
  if (!diagnosis_called_for(dumps)) return std::nullopt;
  FlightDiagnosis diagnosis = diagnose_flight_dumps(dumps, processes);
  // Another node's rank that exited on its watchdog reads "ended" from here, without its dump:
  // this node names no culprit, node 0 (every node's dumps) does. Two culprit lines in one job's
  // output had contradicted each other.
  if (other_nodes_elsewhere) diagnosis.culprit.reset();
  std::string text = format_flight_diagnosis(diagnosis);
  if (other_nodes_elsewhere) {
    text += "partrain: diagnosis: from this node's ranks only; node 0's launcher diagnoses the "
            "dumps of every node\n";
  }
  std::fwrite(text.data(), 1, text.size(), stderr);
  return diagnosis;
}

// Whether the worker command is this partrain binary (`launch --workload` runs `partrain worker`).
bool runs_partrain_itself(const std::vector<std::string>& command) {
  std::error_code error;
  return !command.empty() && std::filesystem::equivalent(command[0], "/proc/self/exe", error);
}

// The ranks' processes as the diagnosis reads them: this node's, as its supervisor saw them,
// and the root cause's when it was another node's (its exit travels in the failure record).
std::vector<RankProcess> observed_processes(const SupervisorResult& result) {
  std::vector<RankProcess> processes = result.processes;
  if (result.root_cause && result.root_cause_remote) {
    RankProcess remote;
    remote.rank = result.root_cause->rank;
    remote.exit = result.root_cause->status;
    remote.ended_before_stop = true;
    processes.push_back(remote);
  }
  return processes;
}

// Whether `rank`'s flight dump says a signal stopped it after its program had ended.
bool stopped_after_program_end(const std::vector<profiler::FlightDump>& dumps, int rank) {
  return std::any_of(dumps.begin(), dumps.end(), [rank](const profiler::FlightDump& dump) {
    return dump.rank == rank && dump.after_program_end;
  });
}

int finish_run(const SupervisorResult& result, const std::optional<FlightDiagnosis>& diagnosis,
               const std::vector<profiler::FlightDump>& dumps) {
  if (result.stop_signal) {
    log::error("stopped by {}; every worker has exited", signal_name(*result.stop_signal));
    return exit_code_for_signal(*result.stop_signal);
  }
  if (result.stdout_error != 0) {
    log::error("the workers' output could not be written to stdout ({}); every worker has exited",
               std::strerror(result.stdout_error));
    return 1;
  }
  if (result.root_cause) {
    std::string summary =
        format_failure_summary(*result.root_cause, result.root_cause_remote,
                               stopped_after_program_end(dumps, result.root_cause->rank));
    if (diagnosis && diagnosis->culprit && *diagnosis->culprit != result.root_cause->rank) {
      summary += format_culprit_note(*result.root_cause, *diagnosis->culprit);
    }
    std::fwrite(summary.data(), 1, summary.size(), stderr);
    return result.root_cause->exit_code();
  }
  return 0;
}

}  // namespace

StatusOr<int> launch(const LaunchConfig& config) {
  RETURN_IF_ERROR(validate(config));
  remove_stale_launcher_dirs();
  ASSIGN_OR_RETURN(RendezvousPlan plan, plan_rendezvous(config));
  // Before the store starts its threads: they inherit the blocked mask.
  ASSIGN_OR_RETURN(SignalChannel signals, SignalChannel::open());
  std::optional<int> stop_signal;
  InterruptCheck interrupted = [&] {
    for (int signal : signals.drain()) {
      if (is_stop_signal(signal)) stop_signal = signal;
    }
    return stop_signal.has_value();
  };
  RETURN_IF_ERROR(choose_identity(config, plan, interrupted));
  if (stop_signal) {
    log::error("stopped by {} while waiting for --token-file", signal_name(*stop_signal));
    return exit_code_for_signal(*stop_signal);
  }

  auto joined = NodeRendezvous::join(plan, interrupted, stop_signal);
  if (stop_signal) {
    if (joined.is_ok()) {
      log::error("stopped by {} during the rendezvous", signal_name(*stop_signal));
    } else {
      log::error("{}", joined.status().message());
    }
    return exit_code_for_signal(*stop_signal);
  }
  if (!joined.is_ok()) return joined.status();
  NodeRendezvous& rdzv = **joined;
  if (plan.nnodes == 1 && plan.master_port == 0) {
    log::info("rendezvous on {}:{}", plan.master_addr, rdzv.port());
  }

  // Made first: torch scripts' error files (@record) go there too. Without it the ranks still
  // dump to stderr and the trace; only the diagnosis and the recorded exceptions are lost.
  std::optional<FlightDumpDir> flight;
  if (auto created = FlightDumpDir::create(); created.is_ok()) {
    flight.emplace(std::move(*created));
  } else {
    log::warn("{}; no flight-recorder diagnosis for this run", created.status().message());
  }
  RunContext run;
  run.run_id = rdzv.run_id();
  // torchrun --standalone makes up a fresh id (a uuid) where none is given, and scripts name
  // their runs after it: the run's own id, which every node agreed on, rather than "none".
  run.rdzv_id = config.rdzv_id == "none" ? run.run_id : config.rdzv_id;
  run.token = plan.token;
  run.master_addr = plan.master_addr;
  run.master_port = rdzv.port();
  run.nnodes = plan.nnodes;
  run.node_rank = plan.node_rank;
  run.nproc_per_node = plan.nproc_per_node;
  run.rdzv_timeout = config.rdzv_timeout;
  run.agent_store = plan.workload.empty();  // the store answers TCPStore clients (node_rendezvous)
  if (flight) run.error_file_dir = flight->path().string();
  if (plan.workload.empty() && plan.nproc_per_node > 1 && !env::get("OMP_NUM_THREADS")) {
    log::info(
        "setting OMP_NUM_THREADS=1 for each worker, as torchrun does, so {} ranks do not "
        "oversubscribe the cores with threads; set it yourself to tune",
        plan.nproc_per_node);
  }
  // More ranks than cores share them whatever the threads: their timings measure the scheduler
  // as much as the work (a benchmark's spread, a straggler that is only descheduled).
  // The cores this launcher may use (a Slurm cpuset, `srun -c`, taskset), not the machine's.
  if (const long cores = static_cast<long>(runner::allowed_cpus().size());
      cores > 0 && plan.nproc_per_node > cores) {
    log::warn(
        "{} ranks on the {} core{} this launcher may use: they take turns on the cores, and times "
        "include the waits for one",
        plan.nproc_per_node, cores, cores == 1 ? "" : "s");
  }
  std::vector<WorkerSpec> specs = worker_specs(config, run);
  // Where the ranks' output goes, before the trace: a log directory that cannot be made must not
  // leave a trace file of a run that never started.
  std::vector<int> ranks;
  for (const WorkerSpec& spec : specs) ranks.push_back(spec.rank);
  std::optional<std::string> log_dir = config.log_dir;
  if (log_dir && config.log_dir_per_run) {
    ASSIGN_OR_RETURN(log_dir, new_run_log_dir(*log_dir, run.run_id, plan.node_rank));
    log::info("rank output: {}/rank_<N>.log", *log_dir);
  }
  RelayOptions relay_options{config.prefix, log_dir, config.tee};
  if (config.worker_stdout_to_stderr) relay_options.terminal_stdout = 2;
  ASSIGN_OR_RETURN(OutputRelay relay, OutputRelay::open(relay_options, ranks));

  // Nor a trace of a command that cannot start.
  if (!specs.empty()) RETURN_IF_ERROR(Subprocess::check_runnable(specs[0].argv[0], specs[0].env));
  // The rank processes the trace hears from die with the launcher too (a launcher under launch
  // starts its workers in sessions of their own, outside the workers' groups).
  auto guard_link = std::make_shared<OrphanGuardLink>();
  // A command's workers (a PyTorch script) record through the injection, as under `partrain
  // trace`; partrain's own workers record themselves. Found before the trace, which a refusal
  // must not leave behind; held until the workers are reaped (its links, injection_links.h).
  std::optional<InjectionLinks> injection;
  if (config.trace && !runs_partrain_itself(config.command)) {
    StatusOr<InjectionLinks> made = InjectionLinks::make(find_injection());
    if (!made.is_ok()) return made.status();
    injection.emplace(std::move(*made));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<NodeTrace> trace, start_trace(config, run, guard_link));
  if (trace) {
    for (WorkerSpec& spec : specs) {
      for (std::string& variable : trace->worker_env()) spec.env.push_back(std::move(variable));
      if (injection) add_injection_environment(spec.env, injection->paths());
    }
  }
  if (flight) {
    // Ours, not one inherited from an outer `partrain trace`: this launcher reads the dumps.
    for (WorkerSpec& spec : specs) {
      std::erase_if(spec.env, [](const std::string& variable) {
        return variable.starts_with(std::string(profiler::kFlightDirEnv) + "=");
      });
      spec.env.push_back(flight->worker_env());
    }
  }
  Supervisor supervisor(
      {config.grace, std::chrono::milliseconds(200), plan.host, plan.node_rank, guard_link},
      signals, relay);
  SupervisorHooks hooks;
  if (rdzv.multi_node()) {
    hooks.publish_failure = [&](const RankFailure& local) { return rdzv.publish_failure(local); };
    hooks.poll_remote_failure = [&] { return rdzv.poll_failure(); };
  }
  auto result = supervisor.run(specs, hooks);
  if (result.is_ok() && result->stop_signal && !result->root_cause) {
    rdzv.publish_stop(*result->stop_signal);
  }
  std::vector<profiler::FlightDump> dumps =
      flight ? flight->read() : std::vector<profiler::FlightDump>();
  rdzv.publish_flight_dumps(dumps);  // before finish(): node 0 reads them once all are done
  rdzv.finish(config.grace + config.rdzv_timeout, interrupted);
  if (!result.is_ok()) {
    if (trace) trace->abandon();
    return result.status();
  }
  for (profiler::FlightDump& dump : rdzv.remote_flight_dumps()) dumps.push_back(std::move(dump));
  std::optional<FlightDiagnosis> diagnosis = diagnose_run(
      dumps, observed_processes(*result), rdzv.multi_node() && plan.node_rank != 0);
  const int exit_code = finish_run(*result, diagnosis, dumps);
  if (trace && diagnosis) {
    trace->record_diagnosis(diagnosis->culprit, diagnosis_statement(*diagnosis));
  }
  if (trace) trace->finish(specs, *result, plan.node_rank, plan.host);
  return exit_code;
}

}  // namespace partrain::launch
