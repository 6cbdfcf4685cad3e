// What Slurm tells a task about where it runs: the variables of an srun step (or of the batch
// script), with its compressed host and task lists.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runner/launch/cluster_env.h"

namespace partrain::launch {

// Slurm's compressed host lists: "node[01-03,07],gpu5" -> node01 node02 node03 node07 gpu5.
// Zero padding follows the range's first number; several bracket groups per name are allowed.
StatusOr<std::vector<std::string>> expand_nodelist(std::string_view nodelist);

// Slurm's tasks per node, in node-id order: "2(x3),1" -> 2 2 2 1.
StatusOr<std::vector<int>> expand_tasks_per_node(std::string_view list);

// nullopt outside a Slurm task (no SLURM_PROCID: an salloc shell is not a task). A step runs on
// SLURM_STEP_NUM_NODES nodes, this one SLURM_NODEID among them (both count within the step, which
// may use part of the allocation), its master the first host of SLURM_STEP_NODELIST; the tasks
// on this node are SLURM_STEP_TASKS_PER_NODE's entry for it. The batch script (no SLURM_STEP_ID)
// runs on the allocation's first node only: on several nodes it is refused.
StatusOr<std::optional<ClusterPlacement>> detect_slurm(const EnvLookup& env);

}  // namespace partrain::launch
