// Where each rank sits in a layout's mesh, as Megatron orders ranks: tp fastest-varying (its
// groups kept inside a node), then cp, then dp, then pp (Megatron-Core's default order
// "tp-cp-ep-dp-pp"). The runner's communicators, the analyzers' stage of a traced rank and the
// recommender's link of each group all follow this one order.
#pragma once

#include "memory/training_layout.h"

namespace partrain::memory {

enum class MeshAxis { kTp, kCp, kDp, kPp };
// Innermost (fastest-varying) first. Expert parallelism subdivides dp x cp for the expert layers
// rather than adding a factor here: expert_stride and ExpertCoords, the same order.
inline constexpr MeshAxis kMeshOrder[] = {MeshAxis::kTp, MeshAxis::kCp, MeshAxis::kDp,
                                          MeshAxis::kPp};

struct MeshCoords {
  int tp = 0;
  int cp = 0;
  int dp = 0;
  int pp = 0;
  int& operator[](MeshAxis axis);
  int operator[](MeshAxis axis) const;
};

// rank = ((pp x dp_size + dp) x cp_size + cp) x tp_size + tp, for a rank of the layout's world.
MeshCoords mesh_coords(int rank, const TrainingLayout& layout);
int mesh_rank(const MeshCoords& coords, const TrainingLayout& layout);
// The ranks between neighbours along `axis`: tp 1, cp tp, dp tp x cp, pp tp x cp x dp.
int mesh_stride(MeshAxis axis, const TrainingLayout& layout);
// The group of ranks that differ from `rank` only along `axis` (a tp group, a pipeline): its
// index among those groups, 0 to ranks / axis size - 1, as the rank of the mesh without `axis`.
int mesh_group(int rank, MeshAxis axis, const TrainingLayout& layout);

// A hybrid's (TrainingLayout::shard) shard group is zero_shard_ranks neighbours in dp x cp, tp
// apart (mesh_stride(kCp)); its replicas, the ranks with the same place in every shard group,
// step over whole groups: tp x shard apart. The same cut of the data ranks as expert
// parallelism's below, by the shard instead of ep.
int zero_replica_stride(const TrainingLayout& layout);
// A rank's place in its shard group and the index of the replica it is in (the group's index).
struct ShardCoords {
  int shard = 0;
  int replica = 0;
};
ShardCoords shard_coords(const MeshCoords& coords, const TrainingLayout& layout);
// The index of `rank`'s shard group (the ranks ZeRO shards over) and of its replica group (the
// ranks holding the same shard, which all-reduce it): communicator splits' colors.
int zero_shard_group(int rank, const TrainingLayout& layout);
int zero_replica_group(int rank, const TrainingLayout& layout);

// Expert parallelism draws its ep ranks from the dp x cp ranks, innermost first (Megatron-Core's
// expert rank order "tp-ep-dp-pp", expert tensor parallelism equal to tp): an ep group is ep
// neighbours in dp x cp, tp apart; its expert-data-parallel group (the ranks holding the same
// experts, dp x cp / ep of them) steps over whole ep groups, tp x ep apart.
int expert_stride(const TrainingLayout& layout);
int expert_data_stride(const TrainingLayout& layout);
// The same order as coordinates: a rank's data index (dp x cp, cp fastest) splits into its ep
// rank (data index mod ep, the fastest) and its expert-data rank (data index / ep). Ranks with the
// same tp, pp and expert-data rank form an expert-parallel group (they hold different experts and
// exchange tokens); ranks with the same tp, pp and ep rank an expert-data-parallel group (they
// hold the same experts and reduce their gradients), expert_data_ranks(layout) of them.
struct ExpertCoords {
  int ep = 0;
  int expert_data = 0;
};
ExpertCoords expert_coords(const MeshCoords& coords, const TrainingLayout& layout);
// The index of `rank`'s expert-parallel group and of its expert-data-parallel group (a
// communicator split's color).
int expert_group(int rank, const TrainingLayout& layout);
int expert_data_group(int rank, const TrainingLayout& layout);

}  // namespace partrain::memory
