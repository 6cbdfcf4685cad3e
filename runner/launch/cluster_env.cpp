#include "runner/launch/cluster_env.h"

#include <charconv>
#include <cstdlib>

namespace partrain::launch {

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

namespace {

// Top-level commas separate hosts; commas inside brackets separate ranges.
std::vector<std::string_view> split_hosts(std::string_view list) {
  std::vector<std::string_view> hosts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      if (i > start) hosts.push_back(list.substr(start, i - start));
      start = i + 1;
    } else if (list[i] == '[') {
      ++depth;
    } else if (list[i] == ']') {
      --depth;
    }
  }
  return hosts;
}

StatusOr<long> parse_index(std::string_view text, std::string_view whole) {
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0) {
    return invalid_argument("malformed Slurm nodelist '{}': '{}' is not a host number", whole,
                            text);
  }
  return value;
}

// "01-03,07" -> "01" "02" "03" "07", keeping the width of each range's first number.
StatusOr<std::vector<std::string>> expand_ranges(std::string_view ranges, std::string_view whole) {
  std::vector<std::string> out;
  for (std::string_view item : split_hosts(ranges)) {
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

StatusOr<std::optional<int>> get_int(const EnvLookup& env, std::string_view name) {
  std::optional<std::string> text = env(name);
  if (!text) return std::optional<int>();
  int value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (text->empty() || ec != std::errc() || end != text->data() + text->size() || value < 0) {
    return invalid_argument("{}='{}' is not a non-negative integer", name, *text);
  }
  return std::optional<int>(value);
}

Status check_rank(const ClusterPlacement& p, std::string_view rank_var) {
  if (p.nnodes < 1 || p.node_rank >= p.nnodes) {
    return invalid_argument("{}: node rank {} (from {}) is not below the node count {}", p.engine,
                            p.node_rank, rank_var, p.nnodes);
  }
  return Status::ok();
}

StatusOr<std::optional<ClusterPlacement>> detect_slurm(const EnvLookup& env) {
  ASSIGN_OR_RETURN(std::optional<int> procid, get_int(env, "SLURM_PROCID"));
  if (!procid) return std::optional<ClusterPlacement>();
  ASSIGN_OR_RETURN(std::optional<int> node_id, get_int(env, "SLURM_NODEID"));
  // An srun step may use fewer nodes than the allocation; the step's count is the one that runs.
  ASSIGN_OR_RETURN(std::optional<int> step_nodes, get_int(env, "SLURM_STEP_NUM_NODES"));
  ASSIGN_OR_RETURN(std::optional<int> job_nodes, get_int(env, "SLURM_NNODES"));
  ClusterPlacement p;
  p.engine = "Slurm";
  p.node_rank = node_id.value_or(*procid);
  p.nnodes = step_nodes.value_or(job_nodes.value_or(1));
  for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    if (std::optional<std::string> list = env(var)) {
      ASSIGN_OR_RETURN(std::vector<std::string> hosts, expand_nodelist(*list));
      if (!hosts.empty()) p.master_addr = hosts.front();
      break;
    }
  }
  RETURN_IF_ERROR(check_rank(p, node_id ? "SLURM_NODEID" : "SLURM_PROCID"));
  return std::optional<ClusterPlacement>(p);
}

StatusOr<std::optional<ClusterPlacement>> detect_mpi(const EnvLookup& env, std::string engine,
                                                     const char* rank_var, const char* size_var) {
  ASSIGN_OR_RETURN(std::optional<int> rank, get_int(env, rank_var));
  ASSIGN_OR_RETURN(std::optional<int> size, get_int(env, size_var));
  if (!rank || !size) return std::optional<ClusterPlacement>();
  ClusterPlacement p;
  p.engine = std::move(engine);
  p.node_rank = *rank;
  p.nnodes = *size;
  RETURN_IF_ERROR(check_rank(p, rank_var));
  return std::optional<ClusterPlacement>(p);
}

}  // namespace

StatusOr<std::vector<std::string>> expand_nodelist(std::string_view nodelist) {
  std::vector<std::string> hosts;
  for (std::string_view host : split_hosts(nodelist)) {
    RETURN_IF_ERROR(expand_host(host, nodelist, hosts));
  }
  return hosts;
}

StatusOr<std::optional<ClusterPlacement>> detect_cluster(const EnvLookup& env) {
  ASSIGN_OR_RETURN(std::optional<ClusterPlacement> slurm, detect_slurm(env));
  if (slurm) return slurm;
  ASSIGN_OR_RETURN(std::optional<ClusterPlacement> ompi,
                   detect_mpi(env, "Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"));
  if (ompi) return ompi;
  return detect_mpi(env, "PMI", "PMI_RANK", "PMI_SIZE");
}

}  // namespace partrain::launch
