// Where this launcher's node sits in a multi-node job: what --nnodes, --node-rank and
// --master-addr say, and for what they leave out, what the cluster engine that started it says
// (Slurm's srun, Open MPI's mpirun, a PMI launcher such as MPICH's). partrain never ssh-es into
// hosts; it reads the engine's variables, and asks Open MPI's PMIx server for rank 0's host.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace partrain::launch {

// Looks a variable up; the process environment in production, a map in tests.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
EnvLookup process_env();

// A variable as a non-negative integer: nullopt when unset, an error naming it when malformed.
StatusOr<std::optional<int>> env_int(const EnvLookup& env, std::string_view name);

// What an engine says about the process it started, as facts: whether it may act as a node's
// launcher is decided with the flags (place_node).
struct ClusterPlacement {
  std::string engine;  // "Slurm", "Open MPI", "MPICH (Hydra)", "PMI": for messages
  int nnodes = 1;
  int node_rank = 0;
  std::string node_rank_from;  // the variable node_rank came from, for messages
  std::optional<std::string> master_addr;
  std::string master_from;  // where master_addr came from ("first host of SLURM_STEP_NODELIST")
  // Open MPI names no host in the environment: rank 0's comes from the job's PMIx server.
  bool master_from_pmix = false;
  // Why this process cannot be one node's launcher as the engine placed it (several launchers
  // on one node, or Slurm's batch script on a multi-node allocation), with the fix; a refusal
  // unless --nnodes and --node-rank place it.
  std::optional<std::string> refusal;
};

// The engine that started this process, nullopt when none did: Open MPI's variables first (an
// mpirun inside a Slurm allocation starts its daemons with srun, whose variables its processes
// inherit), then MPICH's Hydra (PMI_RANK with MPI_LOCALNRANKS), then Slurm's, then PMI's. A
// variable that is set but malformed is an error naming it.
StatusOr<std::optional<ClusterPlacement>> detect_cluster(const EnvLookup& env);

// What place_node reads: the environment, and rank R's host from the job's PMIx server (asked
// only when Open MPI runs several nodes and no --master-addr is given).
struct ClusterProbe {
  EnvLookup env;
  std::function<StatusOr<std::string>(uint32_t rank)> pmix_host_of_rank;
  static ClusterProbe of_process();  // the process environment and libpmix.so.2
};

struct PlacementFlags {
  std::optional<int> nnodes;
  std::optional<int> node_rank;
  std::optional<std::string> master_addr;
};

struct NodePlacement {
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::string engine;  // the engine whose placement was taken; empty when none was
};

// Flags win; then the engine's placement; then MASTER_ADDR for the master of several nodes; else
// one node on 127.0.0.1. Logs what the engine decided. Exit-2 errors (kInvalidArgument) name
// the flag or variable at fault and the fix: a node rank out of range, an engine's refusal,
// several nodes with no master address.
StatusOr<NodePlacement> place_node(const PlacementFlags& flags, const ClusterProbe& probe);

}  // namespace partrain::launch
