// The device mesh: each rank's (pp, dp, tp) coordinates and one communicator per group, ordered
// as Megatron orders them: tp fastest-varying (kept inside a node), then dp, then pp.
#pragma once

#include <memory>

#include "core/status.h"
#include "runner/comm/comm.h"
#include "runner/workload/parallel_layout.h"

namespace partrain::runner {

struct MeshCoords {
  int dp = 0;
  int tp = 0;
  int pp = 0;
};

// rank = pp x (dp_size x tp_size) + dp x tp_size + tp.
MeshCoords mesh_coords(int rank, const ResolvedLayout& layout);
int mesh_rank(const MeshCoords& coords, const ResolvedLayout& layout);

class Mesh {
 public:
  // Splits `world` into the tp, dp and pp groups of `layout`; every rank must call it.
  static StatusOr<Mesh> build(comm::Comm& world, const ResolvedLayout& layout);

  const MeshCoords& coords() const { return coords_; }
  comm::Comm& world() const { return *world_; }
  comm::Comm& tp() const { return *tp_; }  // ranks that differ only in tp
  comm::Comm& dp() const { return *dp_; }  // ranks that differ only in dp
  comm::Comm& pp() const { return *pp_; }  // ranks that differ only in pp; rank i is stage i

 private:
  comm::Comm* world_ = nullptr;
  MeshCoords coords_;
  std::unique_ptr<comm::Comm> tp_;
  std::unique_ptr<comm::Comm> dp_;
  std::unique_ptr<comm::Comm> pp_;
};

}  // namespace partrain::runner
