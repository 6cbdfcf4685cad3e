#include "runner/launch/slurm_env.h"

#include <algorithm>
#include <charconv>

namespace partrain::launch {
namespace {

// Top-level commas separate items; commas inside brackets separate ranges.
std::vector<std::string_view> split_items(std::string_view list) {
  std::vector<std::string_view> items;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      if (i > start) items.push_back(list.substr(start, i - start));
      start = i + 1;
    } else if (list[i] == '[') {
      ++depth;
    } else if (list[i] == ']') {
      --depth;
    }
  }
  return items;
}

std::optional<long> parse_number(std::string_view text) {
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0) {
    return std::nullopt;
  }
  return value;
}

StatusOr<long> parse_index(std::string_view text, std::string_view whole) {
  std::optional<long> value = parse_number(text);
  if (!value) {
    return invalid_argument("malformed Slurm nodelist '{}': '{}' is not a host number", whole,
                            text);
  }
  return *value;
}

// "01-03,07" -> "01" "02" "03" "07", keeping the width of each range's first number.
StatusOr<std::vector<std::string>> expand_ranges(std::string_view ranges, std::string_view whole) {
  std::vector<std::string> out;
  for (std::string_view item : split_items(ranges)) {
    size_t dash = item.find('-');
    std::string_view first = item.substr(0, dash);
    std::string_view last = dash == std::string_view::npos ? first : item.substr(dash + 1);
    ASSIGN_OR_RETURN(long lo, parse_index(first, whole));
    ASSIGN_OR_RETURN(long hi, parse_index(last, whole));
    if (hi < lo || hi - lo > 100000) {
      return invalid_argument("malformed Slurm nodelist '{}': range '{}'", whole, item);
    }
    for (long i = lo; i <= hi; ++i) out.push_back(fmt::format("{:0{}}", i, first.size()));
  }
  return out;
}

Status expand_host(std::string_view host, std::string_view whole, std::vector<std::string>& out) {
  size_t open = host.find('[');
  if (open == std::string_view::npos) {
    if (host.find(']') != std::string_view::npos) {
      return invalid_argument("malformed Slurm nodelist '{}': unmatched ']'", whole);
    }
    out.emplace_back(host);
    return Status::ok();
  }
  size_t close = host.find(']', open);
  if (close == std::string_view::npos) {
    return invalid_argument("malformed Slurm nodelist '{}': unmatched '['", whole);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> numbers,
                   expand_ranges(host.substr(open + 1, close - open - 1), whole));
  std::string_view prefix = host.substr(0, open);
  std::string_view rest = host.substr(close + 1);
  for (const auto& number : numbers) {
    // The rest may hold further bracket groups ("rack[1-2]-n[1-4]").
    std::vector<std::string> tails;
    RETURN_IF_ERROR(expand_host(rest, whole, tails));
    for (const auto& tail : tails) out.push_back(fmt::format("{}{}{}", prefix, number, tail));
  }
  return Status::ok();
}

// The step's first host, the master: SLURM_STEP_NODELIST (a step may run on part of the
// allocation), else the job's list.
Status find_master(const EnvLookup& env, ClusterPlacement& p) {
  for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    std::optional<std::string> list = env(var);
    if (!list) continue;
    ASSIGN_OR_RETURN(std::vector<std::string> hosts, expand_nodelist(*list));
    if (hosts.empty()) return invalid_argument("{} is empty: Slurm names no host", var);
    p.master_addr = hosts.front();
    p.master_from = fmt::format("the first host of {}={}", var, *list);
    return Status::ok();
  }
  return Status::ok();
}

// The tasks Slurm started on this node, from the step's list (the job's in the batch script).
// The step's tasks per node as Slurm lists them, and where from; nullopt when not said (one, as
// srun --ntasks-per-node=1 starts).
struct StepTasks {
  std::vector<int> per_node;
  std::string from;  // "SLURM_STEP_TASKS_PER_NODE=2,1"
};

StatusOr<std::optional<StepTasks>> step_tasks(const EnvLookup& env, int node_id) {
  for (const char* var : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    std::optional<std::string> list = env(var);
    if (!list) continue;
    ASSIGN_OR_RETURN(std::vector<int> tasks, expand_tasks_per_node(*list));
    if (node_id >= static_cast<int>(tasks.size())) {
      return invalid_argument("{}='{}' lists {} node(s), but this is node {} (SLURM_NODEID)", var,
                              *list, tasks.size(), node_id);
    }
    return std::optional<StepTasks>(StepTasks{std::move(tasks), fmt::format("{}={}", var, *list)});
  }
  return std::optional<StepTasks>();
}

}  // namespace

StatusOr<std::vector<std::string>> expand_nodelist(std::string_view nodelist) {
  std::vector<std::string> hosts;
  for (std::string_view host : split_items(nodelist)) {
    RETURN_IF_ERROR(expand_host(host, nodelist, hosts));
  }
  return hosts;
}

StatusOr<std::vector<int>> expand_tasks_per_node(std::string_view list) {
  std::vector<int> tasks;
  for (std::string_view item : split_items(list)) {
    std::string_view count = item;
    long repeat = 1;
    if (size_t open = item.find("(x"); open != std::string_view::npos) {
      count = item.substr(0, open);
      std::optional<long> times = item.back() == ')'
                                      ? parse_number(item.substr(open + 2, item.size() - open - 3))
                                      : std::nullopt;
      if (!times || *times < 1 || *times > 1000000) {
        return invalid_argument("malformed Slurm tasks-per-node list '{}': '{}'", list, item);
      }
      repeat = *times;
    }
    std::optional<long> n = parse_number(count);
    if (!n || *n > 1000000) {
      return invalid_argument("malformed Slurm tasks-per-node list '{}': '{}'", list, item);
    }
    tasks.insert(tasks.end(), repeat, static_cast<int>(*n));
  }
  if (tasks.empty()) return invalid_argument("empty Slurm tasks-per-node list");
  return tasks;
}

StatusOr<std::optional<ClusterPlacement>> detect_slurm(const EnvLookup& env) {
  ASSIGN_OR_RETURN(std::optional<int> procid, env_int(env, "SLURM_PROCID"));
  if (!procid) return std::optional<ClusterPlacement>();
  ClusterPlacement p;
  p.engine = "Slurm";
  RETURN_IF_ERROR(find_master(env, p));
  ASSIGN_OR_RETURN(std::optional<int> node_id, env_int(env, "SLURM_NODEID"));
  p.node_rank = node_id.value_or(*procid);
  p.node_rank_from = node_id ? "SLURM_NODEID" : "SLURM_PROCID";
  const bool in_step = env("SLURM_STEP_ID").has_value() || env("SLURM_STEPID").has_value();
  if (!in_step) {
    // The batch script runs once, on the allocation's first node.
    ASSIGN_OR_RETURN(std::optional<int> job_nodes, env_int(env, "SLURM_NNODES"));
    p.nnodes = 1;
    p.node_rank = 0;
    if (job_nodes.value_or(1) > 1) {
      p.refusal = fmt::format(
          "Slurm: this is the batch script, on the first of the allocation's {} nodes "
          "(SLURM_NNODES={}, no SLURM_STEP_ID), and the other nodes would never start: run "
          "`srun --ntasks-per-node=1 partrain launch ...` in it, one launcher per node "
          "(examples/slurm/train.sbatch)",
          *job_nodes, *job_nodes);
    }
    return std::optional<ClusterPlacement>(p);
  }
  ASSIGN_OR_RETURN(std::optional<int> step_nodes, env_int(env, "SLURM_STEP_NUM_NODES"));
  ASSIGN_OR_RETURN(std::optional<int> job_nodes, env_int(env, "SLURM_NNODES"));
  p.nnodes = step_nodes.value_or(job_nodes.value_or(1));
  if (p.nnodes < 1 || p.node_rank >= p.nnodes) {
    return invalid_argument("Slurm: node {} ({}) is not below the step's node count {}",
                            p.node_rank, p.node_rank_from, p.nnodes);
  }
  ASSIGN_OR_RETURN(std::optional<StepTasks> tasks, step_tasks(env, p.node_rank));
  if (tasks && tasks->per_node[p.node_rank] > 1) {
    const int here = tasks->per_node[p.node_rank];
    p.refusal = fmt::format(
        "Slurm started {} tasks on this node ({}), each a partrain launcher, but partrain launch "
        "runs one launcher per node that starts the node's workers itself (-n): run `srun "
        "--ntasks-per-node=1 partrain launch -n {} ...` (in a batch script: #SBATCH "
        "--ntasks-per-node=1), or place each launcher yourself with --nnodes and --node-rank",
        here, tasks->from, here);
  } else if (tasks) {
    // Another node's launchers refuse (above): this one would wait for them until the
    // rendezvous times out. Every node of the step sees the list, so every node refuses.
    const auto crowded =
        std::find_if(tasks->per_node.begin(), tasks->per_node.end(), [](int n) { return n > 1; });
    if (crowded != tasks->per_node.end()) {
      p.refusal = fmt::format(
          "Slurm started {} tasks on node {} of this step ({}), and partrain launch runs one "
          "launcher per node: that node refuses, and this one would wait for it until the "
          "rendezvous times out; run `srun --ntasks-per-node=1 partrain launch ...` (in a batch "
          "script: #SBATCH --ntasks-per-node=1)",
          *crowded, crowded - tasks->per_node.begin(), tasks->from);
    }
  }
  // srun sets the count and the list together: a count the list does not hold would have this
  // node wait for nodes that never start, until the rendezvous times out. Refused unless the
  // flags place the launcher.
  if (std::optional<std::string> list = env("SLURM_STEP_NODELIST"); list && step_nodes) {
    ASSIGN_OR_RETURN(std::vector<std::string> hosts, expand_nodelist(*list));
    if (static_cast<int>(hosts.size()) != *step_nodes && !p.refusal) {
      p.refusal = fmt::format(
          "Slurm: SLURM_STEP_NUM_NODES={} but SLURM_STEP_NODELIST='{}' lists {} node(s): these "
          "are not the variables one srun step set (inherited from another step, or set by "
          "hand?); run partrain launch under srun, or place it with --nnodes and --node-rank",
          *step_nodes, *list, hosts.size());
    }
  }
  return std::optional<ClusterPlacement>(p);
}

}  // namespace partrain::launch
