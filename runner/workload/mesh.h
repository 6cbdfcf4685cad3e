// The device mesh: each rank's coordinates and one communicator per group, ranks ordered as
// memory/mesh_order.h says (Megatron's order: tp fastest-varying, kept inside a node, then dp,
// then pp).
#pragma once

#include <memory>

#include "core/status.h"
#include "memory/mesh_order.h"
#include "runner/comm/comm.h"
#include "runner/workload/workload_layout.h"

namespace partrain::runner {

using memory::MeshCoords;

class Mesh {
 public:
  // Splits `world` into the tp, dp and pp groups of `layout`, with `experts` (a mixture of
  // experts) its expert-parallel and expert-data-parallel groups, and in a hybrid ZeRO its shard
  // and replica groups; every rank must call it.
  static StatusOr<Mesh> build(comm::Comm& world, const ResolvedLayout& layout,
                              bool experts = false);

  const MeshCoords& coords() const { return coords_; }
  comm::Comm& world() const { return *world_; }
  comm::Comm& tp() const { return *tp_; }  // ranks that differ only in tp
  comm::Comm& dp() const { return *dp_; }  // ranks that differ only in dp
  comm::Comm& pp() const { return *pp_; }  // ranks that differ only in pp; rank i is stage i
  // A mixture of experts (memory::ExpertCoords): the ranks that exchange tokens (rank i holds the
  // i-th share of the experts) and the ranks that hold the same experts. Built with `experts`.
  comm::Comm& ep() const { return *ep_; }
  comm::Comm& expert_data() const { return *expert_data_; }
  // ZeRO's groups: the ranks its states shard over (the dp group, or in a hybrid the shard group:
  // TrainingLayout::shard) and, in a hybrid, the shard's replicas that all-reduce it (null
  // otherwise). A hybrid's groups are splits of the dp group (cp is always 1 here).
  comm::Comm& zero_shard() const { return zero_shard_ ? *zero_shard_ : *dp_; }
  comm::Comm* zero_replicas() const { return zero_replicas_.get(); }

 private:
  comm::Comm* world_ = nullptr;
  MeshCoords coords_;
  std::unique_ptr<comm::Comm> tp_;
  std::unique_ptr<comm::Comm> dp_;
  std::unique_ptr<comm::Comm> pp_;
  std::unique_ptr<comm::Comm> ep_;
  std::unique_ptr<comm::Comm> expert_data_;
  std::unique_ptr<comm::Comm> zero_shard_;
  std::unique_ptr<comm::Comm> zero_replicas_;
};

}  // namespace partrain::runner
