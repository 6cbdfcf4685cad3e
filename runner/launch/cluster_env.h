// Where this launcher sits in a multi-node job when a cluster engine started it: Slurm (srun),
// Open MPI (mpirun) or a PMI launcher. partrain never ssh-es into hosts; it reads what these set.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain::launch {

// Looks a variable up; the process environment in production, a map in tests.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
EnvLookup process_env();

struct ClusterPlacement {
  int nnodes = 1;
  int node_rank = 0;
  std::optional<std::string> master_addr;  // Slurm: the first host of the nodelist
  std::string engine;                      // "Slurm", "Open MPI", "PMI": for messages
};

// Slurm's compressed host lists: "node[01-03,07],gpu5" -> node01 node02 node03 node07 gpu5.
// Zero padding follows the range's first number; several bracket groups per name are allowed.
StatusOr<std::vector<std::string>> expand_nodelist(std::string_view nodelist);

// One launcher per node under the engine; nullopt when none of its variables are set. A variable
// that is set but malformed is an error naming it.
StatusOr<std::optional<ClusterPlacement>> detect_cluster(const EnvLookup& env);

}  // namespace partrain::launch
