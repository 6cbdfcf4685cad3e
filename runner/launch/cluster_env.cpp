#include "runner/launch/cluster_env.h"

#include <charconv>
#include <cstdlib>

#include "core/log.h"
#include "runner/launch/pmix_job.h"
#include "runner/launch/slurm_env.h"

namespace partrain::launch {

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

StatusOr<std::optional<int>> env_int(const EnvLookup& env, std::string_view name) {
  std::optional<std::string> text = env(name);
  if (!text) return std::optional<int>();
  int value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (text->empty() || ec != std::errc() || end != text->data() + text->size() || value < 0) {
    return invalid_argument("{}='{}' is not a non-negative integer", name, *text);
  }
  return std::optional<int>(value);
}

namespace {

// An MPI launcher's process: its rank and size are the node's when it starts one process per
// node, which is what partrain launch needs (`local_size_var` says how many share this node).
struct MpiVariables {
  const char* engine;
  const char* rank;
  const char* size;
  const char* local_size;
  const char* one_per_node;  // the launcher's option for one process per node, for the fix
};

StatusOr<std::optional<ClusterPlacement>> detect_mpi(const EnvLookup& env,
                                                     const MpiVariables& vars) {
  ASSIGN_OR_RETURN(std::optional<int> rank, env_int(env, vars.rank));
  ASSIGN_OR_RETURN(std::optional<int> size, env_int(env, vars.size));
  if (!rank || !size) return std::optional<ClusterPlacement>();
  ClusterPlacement p;
  p.engine = vars.engine;
  p.node_rank = *rank;
  p.node_rank_from = vars.rank;
  p.nnodes = *size;
  if (p.nnodes < 1 || p.node_rank >= p.nnodes) {
    return invalid_argument("{}: rank {} ({}) is not below the size {} ({})", p.engine,
                            p.node_rank, vars.rank, p.nnodes, vars.size);
  }
  ASSIGN_OR_RETURN(std::optional<int> local, env_int(env, vars.local_size));
  if (local.value_or(1) > 1) {
    p.refusal = fmt::format(
        "{} started {} processes on this node ({}={}), each a partrain launcher, but partrain "
        "launch runs one launcher per node that starts the node's workers itself (-n): start "
        "one per node ({}), or place each launcher yourself with --nnodes and --node-rank",
        p.engine, *local, vars.local_size, *local, vars.one_per_node);
  }
  return std::optional<ClusterPlacement>(p);
}

constexpr MpiVariables kOpenMpi{"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                "OMPI_COMM_WORLD_LOCAL_SIZE",
                                "mpirun -np NODES --map-by ppr:1:node partrain launch -n K ..."};
// MPICH's mpiexec (Hydra) says how many of its processes share a node; a bare PMI launcher
// (srun --mpi=pmi2 sets PMI_RANK too, and Slurm's own variables are read first) may not.
constexpr MpiVariables kHydra{"MPICH (Hydra)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS",
                              "mpiexec -n NODES -ppn 1 partrain launch -n K ..."};
constexpr MpiVariables kPmi{"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS",
                            "one process per node"};

}  // namespace

StatusOr<std::optional<ClusterPlacement>> detect_cluster(const EnvLookup& env) {
  ASSIGN_OR_RETURN(std::optional<ClusterPlacement> ompi, detect_mpi(env, kOpenMpi));
  if (ompi) {
    ompi->master_from_pmix = true;  // its environment names mpirun's host, not rank 0's
    return ompi;
  }
  if (env("MPI_LOCALNRANKS")) {
    ASSIGN_OR_RETURN(std::optional<ClusterPlacement> hydra, detect_mpi(env, kHydra));
    if (hydra) return hydra;
  }
  ASSIGN_OR_RETURN(std::optional<ClusterPlacement> slurm, detect_slurm(env));
  if (slurm) return slurm;
  return detect_mpi(env, kPmi);
}

ClusterProbe ClusterProbe::of_process() {
  return {process_env(), [](uint32_t rank) { return launch::pmix_host_of_rank(rank); }};
}

namespace {

struct MasterAddr {
  std::string host;
  std::string from;  // for the log ("the first host of SLURM_STEP_NODELIST=..."); flag: empty
};

// Node 0's address when several nodes run: the flag, the engine's (Slurm's first host, rank 0's
// host through PMIx under Open MPI), MASTER_ADDR, else an error naming --master-addr.
StatusOr<MasterAddr> find_master_addr(const PlacementFlags& flags,
                                      const std::optional<ClusterPlacement>& cluster,
                                      const ClusterProbe& probe, int nnodes) {
  if (flags.master_addr) return MasterAddr{*flags.master_addr, ""};
  if (cluster && cluster->master_addr) {
    return MasterAddr{*cluster->master_addr, cluster->master_from};
  }
  std::string why_not;
  if (cluster && cluster->master_from_pmix) {
    StatusOr<std::string> host = probe.pmix_host_of_rank(0);
    if (host.is_ok()) return MasterAddr{*host, "rank 0's host, from PMIx"};
    why_not = fmt::format("; {} names no host in the environment, and PMIx could not say rank "
                          "0's: {}",
                          cluster->engine, host.status().message());
  } else if (cluster) {
    why_not = fmt::format("; {}'s variables name no host", cluster->engine);
  }
  if (std::optional<std::string> env = probe.env("MASTER_ADDR"); env && !env->empty()) {
    return MasterAddr{*env, "MASTER_ADDR"};
  }
  return invalid_argument("{} nodes but no master address: pass --master-addr (node 0's host, "
                          "the same on every node){}",
                          nnodes, why_not);
}

}  // namespace

StatusOr<NodePlacement> place_node(const PlacementFlags& flags, const ClusterProbe& probe) {
  ASSIGN_OR_RETURN(std::optional<ClusterPlacement> cluster, detect_cluster(probe.env));
  const bool placed_by_flags = flags.nnodes && flags.node_rank;
  if (cluster && cluster->refusal && !placed_by_flags) {
    return invalid_argument("{}", *cluster->refusal);
  }
  NodePlacement placement;
  placement.nnodes = flags.nnodes.value_or(cluster ? cluster->nnodes : 1);
  if (placement.nnodes < 1) {
    return invalid_argument("--nnodes must be at least 1, got {}", placement.nnodes);
  }
  const bool rank_from_engine = !flags.node_rank && cluster && placement.nnodes > 1;
  placement.node_rank = flags.node_rank.value_or(rank_from_engine ? cluster->node_rank : 0);
  if (placement.node_rank < 0 || placement.node_rank >= placement.nnodes) {
    if (rank_from_engine) {
      return invalid_argument(
          "{} says this is node {} ({}), outside --nnodes {}: leave --nnodes out ({} says {}), "
          "or pass --node-rank",
          cluster->engine, placement.node_rank, cluster->node_rank_from, placement.nnodes,
          cluster->engine, cluster->nnodes);
    }
    return invalid_argument("--node-rank {} is outside 0..{} (--nnodes {})", placement.node_rank,
                            placement.nnodes - 1, placement.nnodes);
  }
  if (cluster && (!flags.nnodes || rank_from_engine)) placement.engine = cluster->engine;
  if (placement.nnodes == 1) {
    // One node rendezvouses on itself: a MASTER_ADDR left in the environment (or an engine's
    // first host) names another host for a multi-node job, and the workers would wait for a
    // store that is not there. Only --master-addr is taken then, as torchrun does.
    if (std::optional<std::string> env = probe.env("MASTER_ADDR");
        !flags.master_addr && env && !env->empty() && *env != "127.0.0.1" &&
        *env != "localhost") {
      log::info("one node: rendezvous on 127.0.0.1, not MASTER_ADDR={} (a multi-node setting; "
                "--master-addr overrides)",
                *env);
    }
    placement.master_addr = flags.master_addr.value_or("127.0.0.1");
    return placement;
  }
  ASSIGN_OR_RETURN(MasterAddr master, find_master_addr(flags, cluster, probe, placement.nnodes));
  placement.master_addr = master.host;
  if (cluster && (!placement.engine.empty() || !master.from.empty())) {
    log::info("{}: node {} of {}, master {}{}", cluster->engine, placement.node_rank,
              placement.nnodes, master.host,
              master.from.empty() ? "" : fmt::format(" ({})", master.from));
  }
  return placement;
}

}  // namespace partrain::launch
