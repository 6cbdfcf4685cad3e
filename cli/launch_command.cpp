// `partrain launch`: torchrun's flags onto a LaunchConfig, then the launcher library. Argument
// parsing and messages only; what launching means lives in runner/launch.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/launch_dashboard.h"
#include "cli/metrics_flags.h"
#include "cli/trace_flags.h"
#include "cli/workload_flags.h"
#include "core/duration.h"
#include "core/env.h"
#include "core/json_dump.h"
#include "core/log.h"
#include "core/process_start.h"
#include "core/subprocess.h"
#include "profiler/gpu_counter_sampler.h"
#include "profiler/rank_gpu_counters.h"
#include "runner/device/cpu_device.h"
#include "runner/launch/cluster_env.h"
#include "runner/launch/launcher.h"
#include "runner/launch/stale_launcher_dirs.h"
#include "runner/worker/cpu_binding.h"
#include "runner/workload/token_source.h"
#include "runner/workload/workload_device.h"

namespace partrain::cli {
namespace {

// torchrun's positional is a script it runs with Python: `partrain launch -n 2 train.py` was
// "command not found" (train.py is not on PATH) or "permission denied" (not executable). A file
// that exists but would not run as a program (train.py, or a script without the .py) is run with
// the python3 on PATH, and says which; an executable one (its own shebang) runs as it is.
// The python3 the workers' PATH finds first (what `python3` will run), for the notes.
std::string python_on_path(const std::string& path) {
  for (size_t start = 0; start <= path.size();) {
    const size_t end = std::min(path.find(':', start), path.size());
    const std::filesystem::path candidate =
        std::filesystem::path(end > start ? path.substr(start, end - start) : ".") / "python3";
    if (find_executable(candidate.string(), path) == 0) return candidate.string();
    start = end + 1;
  }
  return "python3";
}

std::string search_path() {
  const char* path_variable = std::getenv("PATH");
  return path_variable != nullptr ? path_variable : "/bin:/usr/bin";
}

// torchrun's -m/--module: the command's first word is a module, run as `python3 -m MODULE`.
std::vector<std::string> torchrun_module_command(std::vector<std::string> command) {
  if (command.empty()) return command;
  log::info("running `python3 -m {}` with {}, as torchrun -m runs it", command.front(),
            python_on_path(search_path()));
  command.insert(command.begin(), {"python3", "-m"});
  return command;
}

std::vector<std::string> torchrun_script_command(std::vector<std::string> command) {
  if (command.empty()) return command;
  const std::string& script = command.front();
  std::error_code error;
  if (!std::filesystem::is_regular_file(script, error)) return command;
  const std::string path = search_path();
  if (find_executable(script, path) == 0) return command;
  const std::string python = python_on_path(path);
  const std::string as_program = script.find('/') == std::string::npos ? "./" + script : script;
  log::info(
      "running {} with {}, as torchrun runs its script with its Python (`-- {}` with a shebang "
      "and chmod +x runs it as a program; `-- /path/to/python {}` chooses the interpreter)",
      script, python, as_program, script);
  command.insert(command.begin(), "python3");
  return command;
}

// Flags as typed; durations and optionals are resolved when the command runs.
struct LaunchFlags {
  int nproc_per_node = 1;
  std::optional<int> nnodes;
  std::optional<int> node_rank;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  std::string rdzv_id = "none";
  std::string rdzv_timeout = "300s";
  std::optional<std::string> token;
  std::optional<std::string> token_file;
  bool rdzv_bind_all = false;
  std::optional<std::string> run_id;
  std::optional<std::string> log_dir;
  bool tee = false;
  bool prefix = true;
  bool standalone = false;
  std::string grace = "30s";                      // torchrun's --shutdown-timeout
  std::optional<std::string> collective_timeout;  // unset: 300s for workloads, off for commands
  std::vector<std::string> command;
  WorkloadFlags workload;
  bool json = false;
  TraceFileFlags trace;
  bool no_trace = false;
  bool tui = false;
  MetricsFlags metrics;
  bool module = false;     // torchrun's -m: the command is a Python module
  bool no_python = false;  // torchrun's --no-python: the command runs as given, never with Python
};

StatusOr<launch::LaunchConfig> to_config(const LaunchFlags& flags) {
  launch::LaunchConfig config;
  config.nproc_per_node = flags.nproc_per_node;
  config.nnodes = flags.nnodes;
  config.node_rank = flags.node_rank;
  if (flags.standalone) {
    if (flags.nnodes.value_or(1) != 1 || flags.node_rank.value_or(0) != 0) {
      return invalid_argument(
          "--standalone runs one node: drop --nnodes/--node-rank, or "
          "--standalone for a multi-node run");
    }
    config.nnodes = 1;
    config.node_rank = 0;
  }
  config.master_addr = flags.master_addr;
  if (flags.master_port) {
    if (*flags.master_port < 0 || *flags.master_port > 65535) {
      return invalid_argument("--master-port must be in 0..65535 (0: a free port), got {}",
                              *flags.master_port);
    }
    config.master_port = static_cast<uint16_t>(*flags.master_port);
  }
  config.rdzv_id = flags.rdzv_id;
  auto rdzv_timeout = parse_duration(flags.rdzv_timeout);
  if (!rdzv_timeout.is_ok()) return rdzv_timeout.status().with_context("--rdzv-timeout");
  config.rdzv_timeout = *rdzv_timeout;
  auto grace = parse_duration(flags.grace);
  if (!grace.is_ok()) return grace.status().with_context("--grace");
  config.grace = *grace;
  // The ranks' watchdog reads it (profiler/flight/collective_watchdog.h); passed on explicitly
  // because the launcher's own PARTRAIN_<FLAG> variables are not. A command's ranks (a PyTorch
  // job, through the injection library) get one only when asked: torch's own timeouts govern
  // them otherwise, as under torchrun (docs/reliability.md).
  if (flags.collective_timeout && !flags.command.empty() && flags.no_trace) {
    return invalid_argument(
        "--collective-timeout watches a command's ranks through the trace's injection "
        "library: drop --no-trace, or --collective-timeout");
  }
  if (flags.collective_timeout || flags.command.empty()) {
    const std::string text = flags.collective_timeout.value_or("300s");
    auto collective_timeout = parse_duration(text);
    if (!collective_timeout.is_ok()) {
      return collective_timeout.status().with_context("--collective-timeout");
    }
    if (collective_timeout->count() <= 0) {
      return invalid_argument("--collective-timeout must be positive, got {}", text);
    }
    config.extra_env.push_back(
        fmt::format("PARTRAIN_COLLECTIVE_TIMEOUT={}ns", collective_timeout->count()));
  }
  config.token = flags.token;
  config.token_file = flags.token_file;
  config.rdzv_bind_all = flags.rdzv_bind_all;
  config.run_id = flags.run_id;
  config.log_dir = flags.log_dir;
  config.log_dir_per_run = true;
  // torchrun's --tee takes the streams (0-3); partrain's is a switch, and the number would be
  // run as the command.
  if (flags.tee && !flags.command.empty() && flags.command.front().size() == 1 &&
      flags.command.front()[0] >= '0' && flags.command.front()[0] <= '3') {
    return invalid_argument(
        "--tee takes no value in partrain launch (torchrun's --tee {} picks streams): write "
        "--tee alone, with --log-dir DIR; it copies both streams",
        flags.command.front());
  }
  if (flags.tee && !flags.log_dir) {
    return invalid_argument(
        "--tee copies the ranks' output to the terminal besides --log-dir's "
        "files: add --log-dir DIR, or drop --tee (without --log-dir the "
        "output goes to the terminal alone)");
  }
  config.tee = flags.tee;
  config.prefix = flags.prefix;
  if (flags.module && flags.no_python) {
    return invalid_argument(
        "-m runs a module with Python and --no-python runs no Python: give one");
  }
  config.command = flags.module      ? torchrun_module_command(flags.command)
                   : flags.no_python ? flags.command
                                     : torchrun_script_command(flags.command);
  if (flags.no_trace && flags.trace.file) {
    // One of them may be an exported PARTRAIN_TRACE or PARTRAIN_NO_TRACE nobody typed.
    std::string exported = set_in_environment("trace", *flags.trace.file);
    const std::string no_trace = set_in_environment("no-trace", std::nullopt);
    if (!no_trace.empty()) exported += (exported.empty() ? "" : " and ") + no_trace;
    return invalid_argument("pass either --trace FILE or --no-trace, not both{}",
                            exported.empty() ? std::string()
                                             : fmt::format(" ({} in the environment: unset it "
                                                           "or pass the other on the command line)",
                                                           exported));
  }
  if (flags.no_trace && flags.trace.max_size) {
    return invalid_argument("--trace-max-size limits the trace: drop it or --no-trace");
  }
  ASSIGN_OR_RETURN(config.trace_max_bytes,
                   check_trace_file_flags(TraceFlagsCommand::kLaunch, flags.trace));
  if (flags.trace.nvml_interval) {
    if (flags.no_trace) {
      return invalid_argument("--nvml-interval samples GPU counters into the trace: drop it or "
                              "--no-trace");
    }
    RETURN_IF_ERROR(profiler::parse_nvml_interval(*flags.trace.nvml_interval).status());
    // The ranks' tracing reads it (profiler/rank_gpu_counters.h).
    config.extra_env.push_back(
        fmt::format("{}={}", profiler::kNvmlIntervalEnv, *flags.trace.nvml_interval));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> gpu_trace, gpu_trace_environment(flags.trace));
  if (gpu_trace) {
    if (flags.no_trace) {
      return invalid_argument("--gpu-trace says how much of the GPU the trace records: drop it "
                              "or --no-trace");
    }
    config.extra_env.push_back(*gpu_trace);  // the ranks' injection reads it
  }
  config.trace = !flags.no_trace;
  config.trace_file = flags.trace.file;
  config.trace_command = invocation_line();
  nlohmann::json run_config = {{"nproc_per_node", flags.nproc_per_node}};
  if (!flags.command.empty()) run_config["command"] = flags.command;
  config.trace_config_json = dump_json(run_config);
  return config;
}

// Where this node sits (flags, else the cluster engine), settled before a workload is planned for
// the whole world; the launcher then takes it as given and does not ask the engine again.
Status place_this_node(launch::LaunchConfig& config) {
  ASSIGN_OR_RETURN(launch::NodePlacement placement,
                   launch::place_node({config.nnodes, config.node_rank, config.master_addr},
                                      launch::ClusterProbe::of_process()));
  config.nnodes = placement.nnodes;
  config.node_rank = placement.node_rank;
  config.master_addr = placement.master_addr;
  return Status::ok();
}

// `--workload`: checks the layout before any rank starts, then runs `partrain worker` on every
// rank with the workload as PARTRAIN_WORKLOAD_CONFIG. With --json, rank 0 leaves the summary in
// a file the launcher prints, and the workers' own output goes to stderr.
// A --json run's summary: rank 0 writes it into a private directory of the launcher's, made new
// (a predictable name in a shared TMPDIR could be a link another user planted), and the launcher
// prints it once the run has ended. The directory goes with this object.
struct SummaryDir {
  std::filesystem::path dir;  // empty: no --json summary
  SummaryDir() = default;
  SummaryDir(const SummaryDir&) = delete;
  SummaryDir& operator=(const SummaryDir&) = delete;
  ~SummaryDir() {
    std::error_code error;
    if (!dir.empty()) std::filesystem::remove_all(dir, error);
    if (error) log::warn("cannot remove {}: {}", dir.string(), error.message());
  }
  std::filesystem::path file() const { return dir / "summary.json"; }
};

Status plan_workload(const LaunchFlags& flags, launch::LaunchConfig& config, SummaryDir& summary) {
  if (!flags.command.empty()) {
    return invalid_argument("pass either --workload or a command, not both");
  }
  const int world = *config.nnodes * config.nproc_per_node;  // placed by place_this_node
  // The device first: the workload is checked for the device it will run on (bf16 needs CUDA).
  ASSIGN_OR_RETURN(runner::DeviceChoice choice,
                   runner::choose_device(flags.workload.device, flags.workload.comm,
                                         config.nproc_per_node));
  if (!choice.notice.empty()) log::info("{}", choice.notice);
  WorkloadFlags resolved = flags.workload;
  resolved.device = choice.device;
  resolved.comm = choice.comm;
  ASSIGN_OR_RETURN(runner::WorkloadConfig workload, to_workload_config(resolved, world, flags.json));
  if (workload.cpu_bind == "core") {
    // Too few CPUs for the node's ranks is refused here, once, not by every rank after it started.
    RETURN_IF_ERROR(
        runner::rank_cpus(runner::allowed_cpus(), 0, config.nproc_per_node, workload.blas_threads)
            .status());
  }
  if (!workload.data_path.empty()) {
    // A bad token file is refused here, once, rather than by every rank after it started.
    RETURN_IF_ERROR(runner::open_token_file(workload.data_path, workload.model.vocab,
                                            workload.model.seq)
                        .status());
  }
  // The workload's GEMMs are OpenBLAS's: where this OpenBLAS does not know the CPU and fell back
  // to its generic kernels (a quarter of the rate), the ranks get the right ones, unless the user
  // chose a core type.
  // Both CPU devices (cpu-isolated too: it trains bit for bit as cpu does, the same kernels).
  // Asking opens OpenBLAS in the launcher, with a pool of one thread: none started.
  if (choice.device.starts_with("cpu") && std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    if (const std::optional<std::string> core = runner::better_blas_coretype()) {
      log::info("{}; the workers get OPENBLAS_CORETYPE={}", *runner::blas_kernel_warning(), *core);
      config.extra_env.push_back("OPENBLAS_CORETYPE=" + *core);
    }
  }
  config.command = {std::filesystem::read_symlink("/proc/self/exe").string(), "worker"};
  config.extra_env.push_back("PARTRAIN_WORKLOAD_CONFIG=" + runner::workload_to_json(workload));
  // The trace's run row: the checked workload, the backend and the launch shape.
  nlohmann::json run_config = nlohmann::json::parse(runner::workload_to_json(workload));
  run_config["backend"] = workload.comm;
  run_config["nproc_per_node"] = config.nproc_per_node;
  config.trace_config_json = dump_json(run_config);
  if (flags.json) {
    // Rank 0 writes it, on node 0: another node's launcher expects no summary and prints none.
    if (config.node_rank.value_or(0) == 0) {
      ASSIGN_OR_RETURN(summary.dir,
                       launch::make_launcher_dir(launch::kSummaryDirPrefix, "the run's summary"));
      config.extra_env.push_back("PARTRAIN_SUMMARY_FILE=" + summary.file().string());
    }
    config.worker_stdout_to_stderr = true;
  }
  log::info("workload: {}", runner::describe_layout(workload.resolved));
  return Status::ok();
}

int run_launch(const LaunchFlags& flags, std::vector<std::string> own_env_vars,
               const std::vector<std::string>& workload_flags) {
  discard_output_to_closed_standard_fds();  // a cron job's launch: the run goes on
  // Kubeflow's elastic PyTorchJob exports torchrun's restart budget; launch takes the other
  // PET_ flags it shares, but restarts no worker: said, not silently dropped (as a flag, it is
  // refused).
  if (const std::optional<std::string> restarts = env::get("PET_MAX_RESTARTS");
      restarts && *restarts != "0" && !restarts->empty()) {
    log::warn(
        "PET_MAX_RESTARTS={} in the environment: partrain launch does not restart workers "
        "(torchrun's --max-restarts); a failed rank ends the run with its exit code, for the "
        "scheduler to restart",
        *restarts);
  }
  auto config = to_config(flags);
  if (!config.is_ok()) {
    log::error("{}", config.status().message());
    return config.status().exit_code();
  }
  config->strip_env = std::move(own_env_vars);
  if (flags.tui && flags.json) {
    log::error("--tui and --json both want the terminal's stdout: pass one of them");
    return 2;
  }
  if (Status placed = place_this_node(*config); !placed.is_ok()) {
    log::error("{}", placed.message());
    return placed.exit_code();
  }
  SummaryDir summary;
  if (flags.workload.workload) {
    if (Status planned = plan_workload(flags, *config, summary); !planned.is_ok()) {
      log::error("{}", planned.message());
      return planned.exit_code();
    }
  } else if (flags.json) {
    // PARTRAIN_JSON=1 exported for analyze's or top's --json reaches launch too: say so.
    log::error("--json applies to --workload runs (it prints their summary){}",
               from_environment_note("json"));
    return 2;
  } else if (!workload_flags.empty()) {
    // `--inject crash:rank=1 -- python3 train.py` would otherwise pass without injecting anything.
    const std::string names = fmt::format("{}", fmt::join(workload_flags, ", "));
    const bool one = workload_flags.size() == 1;
    log::error(
        "{} {} to --workload runs, not to a command: drop {} (from the command line, the "
        "PARTRAIN_ environment and --config), or run --workload gpt|mlp",
        names, one ? "applies" : "apply", one ? "it" : "them");
    return 2;
  }
  // Bound before any rank starts: a port in use stops the launch here.
  auto metrics = start_launch_metrics(flags.metrics, *config);
  if (!metrics.is_ok()) {
    log::error("{}", metrics.status().message());
    return metrics.status().exit_code();
  }
  auto exit_code = flags.tui ? launch_with_dashboard(*config) : launch::launch(*config);
  if (!exit_code.is_ok()) {
    log::error("{}", exit_code.status().message());
    finish_metrics(metrics->get(), exit_code.status().exit_code());
    return exit_code.status().exit_code();
  }
  if (!summary.dir.empty()) {
    std::ifstream file(summary.file());
    std::stringstream text;
    text << file.rdbuf();
    const std::string json = text.str();
    if (json.empty() && *exit_code == 0) {
      // Never a successful run with nothing on stdout where its summary was asked for.
      log::error("the run ended without its summary: rank 0 did not write {}",
                 summary.file().string());
      finish_metrics(metrics->get(), 1);
      return 1;
    }
    std::fwrite(json.data(), 1, json.size(), stdout);
  }
  finish_metrics(metrics->get(), *exit_code);  // its final page; the exit code stays the run's
  return *exit_code;
}

constexpr const char* kLaunchFooter =
    "The worker command follows `--`. Each worker gets torchrun's environment: RANK, LOCAL_RANK, "
    "WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK, ROLE_WORLD_SIZE, MASTER_ADDR, "
    "MASTER_PORT (node 0's rendezvous store), TORCHELASTIC_* (a per-rank error file for torch's "
    "@record, read back into the failure summary), plus PARTRAIN_RUN_ID, PARTRAIN_TOKEN, "
    "PARTRAIN_NNODES and PARTRAIN_NODE_RANK. The store also speaks PyTorch's TCPStore protocol "
    "(TORCHELASTIC_USE_AGENT_STORE=True, as torchrun's agent store), so "
    "init_process_group(\"env://\") runs unmodified.\n"
    "Several nodes need one secret: the same --token (or PARTRAIN_TOKEN) on every node, or "
    "--token-file in a directory they share. Node 0's store listens on --master-addr's interface "
    "only (--rdzv-bind-all: every interface). A node that disappears is named on the others "
    "within seconds; Ctrl-C on any node stops them all.\n\n"
    "Examples:\n"
    "  partrain launch -n 4 -- python3 train.py --lr 3e-4\n"
    "  partrain launch -n 8 --log-dir logs --tee -- ./my_worker\n"
    "  # two nodes by hand, one launcher each:\n"
    "  partrain launch --nnodes 2 --node-rank 0 --master-addr node01 --token $SECRET -n 4 -- "
    "python3 train.py\n"
    "  partrain launch --nnodes 2 --node-rank 1 --master-addr node01 --token $SECRET -n 4 -- "
    "python3 train.py\n"
    "  # or started by the cluster's engine, one launcher per node:\n"
    "  srun -N2 --ntasks-per-node=1 partrain launch -n 4 -- python3 train.py\n"
    "  mpirun -np 2 --map-by ppr:1:node partrain launch -n 4 -- python3 train.py\n\n"
    "What --nnodes, --node-rank and --master-addr leave out comes from the engine that started "
    "the launcher (docs/clusters.md):\n"
    "  Slurm: the step's SLURM_STEP_NUM_NODES nodes, this one SLURM_NODEID, master the first host "
    "of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST; compressed lists such as gpu[01-04] "
    "expanded). A step with several tasks on a node (SLURM_STEP_TASKS_PER_NODE), or the batch "
    "script itself on several nodes, is refused (exit 2): start one task per node.\n"
    "  Open MPI: OMPI_COMM_WORLD_SIZE nodes, this one OMPI_COMM_WORLD_RANK, master rank 0's host "
    "as the job's PMIx server says (libpmix.so.2); several processes on a node "
    "(OMPI_COMM_WORLD_LOCAL_SIZE) are refused (exit 2).\n"
    "  MPICH's mpiexec and other PMI launchers: PMI_SIZE nodes, this one PMI_RANK (refused when "
    "MPI_LOCALNRANKS says several share a node); they name no host: pass --master-addr or set "
    "MASTER_ADDR.\n"
    "Passing both --nnodes and --node-rank places a launcher by hand; the engine then only "
    "supplies the master address if --master-addr is left out.\n\n"
    "When a rank fails, the others get SIGTERM and SIGKILL after --grace; a summary names the "
    "first failing rank and the launcher exits with its code (128 + signal when it was killed). "
    "Ctrl-C / SIGTERM are forwarded to the workers (exit 130 / 143); when stdout's reader "
    "goes away (| head), the workers are stopped as on SIGPIPE (exit 141).\n"
    "Built-in workloads run a collective watchdog in every rank, a command's PyTorch ranks "
    "when --collective-timeout is given (torch's own timeouts otherwise): a collective not "
    "completed within --collective-timeout (workloads: 300s), or one that fails, makes the "
    "rank dump its flight "
    "recorder (its last collectives with their state) to stderr and the trace; the launcher "
    "gathers every rank's dump and prints a diagnosis per communicator (matched, op mismatch, "
    "size mismatch, missing ranks at a seq) naming the culprit rank. A rank whose watchdog "
    "fired exits 124. --inject KIND:rank=R[,step=S][,ms=M][,code=C] tries it out: slow, crash "
    "(134), exit (code C), hang (124), stop (SIGSTOP: 124), desync (124, or the failing rank's "
    "code), oom (1); see docs/reliability.md.\n"
    "The run is traced by default: each node's launcher runs a collector and writes one SQLite "
    "file (./partrain-runs/<run-id>.db, or --trace FILE); workers find it through "
    "PARTRAIN_COLLECTOR. Built-in workloads record every collective, compute phase, step and "
    "memory change; a command's workers get the injection `partrain trace` gives (a PyTorch "
    "script's collectives and steps: docs/pytorch.md). Look at it with `partrain export "
    "--format chrome`, `partrain merge` joins the node files. --no-trace turns it off.\n"
    "Exit codes: 0 all ranks succeeded; the first failing rank's code (124 when its collective "
    "watchdog fired); 128 + signal when it was killed; 1 launcher failure (port in use, ...); 2 "
    "invalid flags; 124 rendezvous timeout; 126 command not executable; 127 command not found.";

// torchrun's flags partrain does not have, each refused saying what to do instead (CLI11 listed
// the flag, and the command after it, as "not expected"). Hidden from --help.
void refuse_torchrun_flags(CLI::App& cmd) {
  struct Unsupported {
    const char* names;
    const char* instead;
  };
  static constexpr Unsupported kUnsupported[] = {
      {"--rdzv-endpoint,--rdzv_endpoint",
       "the rendezvous is a store on node 0: give --master-addr HOST --master-port PORT"},
      {"--rdzv-backend,--rdzv_backend",
       "the rendezvous is a store on node 0 (torchrun's static c10d rendezvous): leave it out, "
       "and give --master-addr, --master-port and --rdzv-timeout"},
      {"--rdzv-conf,--rdzv_conf",
       "the rendezvous is a store on node 0: its timeout is --rdzv-timeout (10s, 5m); leave the "
       "rest out"},
      {"-t",
       "torchrun's -t is --tee N: give --log-dir DIR --tee for each rank's output in a file and "
       "on the terminal"},
      {"--monitor-interval,--monitor_interval",
       "the launcher watches its workers continuously: leave it out"},
      {"--role", "every worker has the role 'default' (ROLE_NAME): leave it out"},
      {"--redirects,-r",
       "give --log-dir DIR for each rank's output in DIR/<run-id>/rank_N.log (--tee to see it "
       "too), or --no-prefix for the raw streams"},
      {"--start-method,--start_method",
       "workers are always separate processes started with fork and exec: leave it out"},
      {"--local-addr,--local_addr", "workers reach node 0 at --master-addr: leave it out"},
      {"--local-ranks-filter,--local_ranks_filter",
       "every rank's output is relayed, each line prefixed [rank N]: give --log-dir DIR for a "
       "file per rank, or filter the prefix (grep '^\\[rank 0\\]')"},
      {"--logs-specs,--logs_specs", "give --log-dir DIR (a file per rank in DIR/<run-id>/)"},
      {"--signals-to-handle,--signals_to_handle",
       "the launcher passes SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 on to the "
       "workers (Slurm's warning signals included): leave it out"},
  };
  for (const Unsupported& flag : kUnsupported) {
    const std::string names = flag.names;
    const std::string instead = flag.instead;
    cmd.add_option_function<std::string>(
           names,
           [names, instead](const std::string&) {
             throw CLI::ValidationError(names.substr(0, names.find(',')), instead);
           },
           "")
        ->group("");
  }
  // torchrun's default, 0, is what partrain does: accepted; more restarts are refused.
  cmd.add_option_function<std::string>(
         "--max-restarts,--max_restarts",
         [](const std::string& value) {
           if (value == "0") return;
           throw CLI::ValidationError(
               "--max-restarts",
               "partrain launch does not restart workers (torchrun's elastic restarts): a failed "
               "rank ends the run with its exit code and a diagnosis; restart the job from your "
               "scheduler, or give 0");
         },
         "")
      ->group("");
  cmd.add_flag_callback(
         "--run-path,--run_path",
         [] {
           throw CLI::ValidationError(
               "--run-path",
               "torchrun's --run-path runs the script inside its own interpreter; partrain's "
               "workers are processes of their own: give the script (`train.py`), run with "
               "Python, or -m MODULE");
         },
         "")
      ->group("");
}

}  // namespace

Subcommand add_launch_command(CLI::App& parent) {
  CLI::App* cmd = parent.add_subcommand(
      "launch", "Run N worker processes per node with torchrun's environment, rendezvous and "
                "failure handling");
  auto flags = std::make_shared<LaunchFlags>();
  refuse_torchrun_flags(*cmd);
  // The flags torchrun has too also read its PET_<FLAG> variables (after PARTRAIN_<FLAG>).
  const auto torchrun = [](CLI::Option* option) {
    return also_from_torchrun_env(option, {torchrun_env_name(option->get_lnames().front())});
  };
  torchrun(cmd->add_option("-n,--nproc-per-node,--nproc_per_node", flags->nproc_per_node,
                           "Workers on this node"))
      ->capture_default_str();
  torchrun(
      cmd->add_option("--nnodes", flags->nnodes,
                      "Number of nodes (default: from Slurm / Open MPI / PMI, below; else 1)"));
  torchrun(cmd->add_option("--node-rank,--node_rank", flags->node_rank,
                           "This node's rank, 0..nnodes-1 (default: from the engine, below; else "
                           "0)"));
  torchrun(cmd->add_option("--master-addr,--master_addr", flags->master_addr,
                           "Node 0's address (default: 127.0.0.1 on one node; with several, from "
                           "the engine (below), else $MASTER_ADDR, else required)"));
  torchrun(cmd->add_option("--master-port,--master_port", flags->master_port,
                           "Rendezvous port on node 0 (default: 29500 for several nodes, a free "
                           "port for one)"));
  torchrun(cmd->add_option("--rdzv-id,--rdzv_id", flags->rdzv_id,
                           "Job id shared by the nodes (TORCHELASTIC_RUN_ID; default: the run's "
                           "id)"));
  cmd->add_option("--rdzv-timeout,--rdzv_timeout", flags->rdzv_timeout,
                  "How long nodes wait for each other (10s, 5m; bare number = seconds)")
      ->capture_default_str();
  cmd->add_option("--token", flags->token,
                  "Shared secret of the rendezvous store, the same on every node (required with "
                  "several nodes unless --token-file; default: random on one node)");
  cmd->add_option("--token-file", flags->token_file,
                  "Several nodes: read the secret from FILE in a directory every node shares; "
                  "node 0 writes a random one there (mode 600) when it does not exist");
  cmd->add_flag("--rdzv-bind-all", flags->rdzv_bind_all,
                "Node 0's store listens on every interface, not only --master-addr's");
  cmd->add_option("--run-id", flags->run_id, "PARTRAIN_RUN_ID (default: generated)");
  torchrun(
      cmd->add_option("--log-dir,--log_dir", flags->log_dir,
                      "Write each rank's output to DIR/<run-id>/rank_N.log instead of the terminal "
                      "(a directory per run, as torchrun's; <run-id>.nodeN on node N of several; "
                      "<run-id>.2 when an id is reused)"));
  cmd->add_flag("--tee", flags->tee, "With --log-dir: print the output on the terminal as well");
  // Not from PARTRAIN_PREFIX: module files set <PACKAGE>_PREFIX to the install prefix, which made
  // every launch exit 2 (docs/decisions.md).
  without_env_var(cmd->add_flag(
      "--prefix,!--no-prefix", flags->prefix,
      "Prefix each output line with \"[rank N] \" (default; --no-prefix turns it off)"));
  also_from_torchrun_env(
      cmd->add_option("--grace,--shutdown-timeout,--shutdown_timeout", flags->grace,
                      "After SIGTERM, how long workers get before SIGKILL (10s, 500ms; bare "
                      "numbers: seconds; torchrun's --shutdown-timeout)"),
      {"PET_SHUTDOWN_TIMEOUT", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"})
      ->capture_default_str();
  torchrun(
      cmd->add_flag("--standalone", flags->standalone, "Single node (as torchrun --standalone)"));
  torchrun(cmd->add_flag("-m,--module", flags->module,
                         "The command's first word is a Python module, run as `python3 -m "
                         "MODULE ARGS` (as torchrun -m)"));
  torchrun(cmd->add_flag("--no-python,--no_python", flags->no_python,
                         "Run the command as given, never with Python (as torchrun "
                         "--no-python): a script without its execute bit then fails to start"));
  cmd->add_option("command", flags->command,
                  "The worker command and its arguments, after `--` or after launch's own flags "
                  "(as torchrun: everything from the script on is the script's; a script that is "
                  "not executable runs with python3)");
  // torchrun's rule: the first word that is no flag of launch starts the worker command, and the
  // script's own flags after it (-n 3, --trace, --steps) are the script's, not launch's.
  cmd->positionals_at_end();
  cmd->add_flag("--json", flags->json,
                "With --workload: print the run's summary as one JSON document on stdout (the "
                "workers' output goes to stderr)");
  add_trace_file_flags(*cmd, TraceFlagsCommand::kLaunch, flags->trace);
  cmd->add_flag("--no-trace", flags->no_trace, "Do not trace the run");
  cmd->add_flag("--tui", flags->tui,
                "Show the live dashboard (partrain top) while the run goes on; the ranks' output "
                "goes to --log-dir (default: beside the trace, <run-id>.logs/)");
  add_metrics_flags(*cmd, flags->metrics);
  add_workload_flags(*cmd, flags->workload);
  cmd->add_option("--collective-timeout", flags->collective_timeout,
                  "A collective unfinished this long fires the rank's watchdog (flight-recorder "
                  "dump, diagnosis, exit 124) (2s, 5m; built-in workloads: default 300s; a "
                  "command's PyTorch ranks: off unless given, which needs the trace)");
  cmd->footer(kLaunchFooter);
  return {cmd, [flags, cmd] {
            return run_launch(*flags, flag_env_names(*cmd), workload_flags_given(*cmd));
          }};
}

}  // namespace partrain::cli
