#include "runner/launch/worker_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

extern char** environ;

namespace partrain::launch {

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** var = environ; var != nullptr && *var != nullptr; ++var) env.emplace_back(*var);
  return env;
}

std::string error_file_path(const std::string& dir, int rank) {
  // Not .json: the directory is the flight-recorder dumps' too, which are read as *.json.
  return fmt::format("{}/rank_{}.torch-error", dir, rank);
}

namespace {

std::string name_of(const std::string& assignment) {
  return assignment.substr(0, assignment.find('='));
}

std::map<std::string, std::string> run_variables(const RunContext& run, int local_rank) {
  const std::string rank = std::to_string(run.global_rank(local_rank));
  const std::string world = std::to_string(run.world_size());
  return {
      {"RANK", rank},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", world},
      {"LOCAL_WORLD_SIZE", std::to_string(run.nproc_per_node)},
      {"GROUP_RANK", std::to_string(run.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(run.nnodes)},
      {"ROLE_NAME", "default"},
      {"ROLE_RANK", rank},
      {"ROLE_WORLD_SIZE", world},
      {"MASTER_ADDR", run.master_addr},
      {"MASTER_PORT", std::to_string(run.master_port)},
      {"TORCHELASTIC_RUN_ID", run.rdzv_id},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"TORCHELASTIC_USE_AGENT_STORE", run.agent_store ? "True" : "False"},
      {"TORCHELASTIC_ERROR_FILE", run.error_file_dir.empty()
                                      ? std::string()
                                      : error_file_path(run.error_file_dir,
                                                        run.global_rank(local_rank))},
      {"PARTRAIN_RUN_ID", run.run_id},
      {"PARTRAIN_TOKEN", run.token},
      {"PARTRAIN_NNODES", std::to_string(run.nnodes)},
      {"PARTRAIN_NODE_RANK", std::to_string(run.node_rank)},
      {"PARTRAIN_STORE_TIMEOUT", fmt::format("{}ns", run.rdzv_timeout.count())},
  };
}

}  // namespace

std::vector<std::string> worker_environment(const std::vector<std::string>& base,
                                            const std::vector<std::string>& strip,
                                            const RunContext& run, int local_rank) {
  std::map<std::string, std::string> vars = run_variables(run, local_rank);
  std::vector<std::string> env;
  bool has_omp_threads = false;
  bool has_async_error_handling = false;
  bool has_python_buffering = false;
  for (const auto& assignment : base) {
    const std::string name = name_of(assignment);
    if (vars.count(name) != 0) continue;
    if (std::find(strip.begin(), strip.end(), name) != strip.end()) continue;
    has_omp_threads = has_omp_threads || name == "OMP_NUM_THREADS";
    has_async_error_handling =
        has_async_error_handling || name == "TORCH_NCCL_ASYNC_ERROR_HANDLING";
    has_python_buffering = has_python_buffering || name == "PYTHONUNBUFFERED";
    env.push_back(assignment);
  }
  // As torchrun: N ranks each spawning one OpenMP thread per core would oversubscribe the node.
  if (!has_omp_threads && run.nproc_per_node > 1) env.emplace_back("OMP_NUM_THREADS=1");
  // As torchrun: a failed NCCL collective aborts its communicator instead of hanging the rank.
  if (!has_async_error_handling) env.emplace_back("TORCH_NCCL_ASYNC_ERROR_HANDLING=1");
  // A worker writes into the launcher's pipe, where Python buffers its print()s in 8 KiB blocks:
  // a training loop's progress lines showed only when the block filled or the rank ended, and a
  // killed rank's last lines were lost. Unbuffered, they come as printed, as on a terminal.
  if (!has_python_buffering) env.emplace_back("PYTHONUNBUFFERED=1");
  for (const auto& [name, value] : vars) env.push_back(fmt::format("{}={}", name, value));
  return env;
}

}  // namespace partrain::launch
