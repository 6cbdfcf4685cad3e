#include "runner/workload/mesh.h"

namespace partrain::runner {

MeshCoords mesh_coords(int rank, const ResolvedLayout& layout) {
  MeshCoords coords;
  coords.tp = rank % layout.tp;
  coords.dp = (rank / layout.tp) % layout.dp;
  coords.pp = rank / (layout.tp * layout.dp);
  return coords;
}

int mesh_rank(const MeshCoords& coords, const ResolvedLayout& layout) {
  return coords.pp * layout.dp * layout.tp + coords.dp * layout.tp + coords.tp;
}

StatusOr<Mesh> Mesh::build(comm::Comm& world, const ResolvedLayout& layout) {
  if (world.size() != layout.dp * layout.tp * layout.pp) {
    return invalid_argument("the layout needs {} ranks but the world has {}",
                            layout.dp * layout.tp * layout.pp, world.size());
  }
  Mesh mesh;
  mesh.world_ = &world;
  mesh.coords_ = mesh_coords(world.rank(), layout);
  const MeshCoords& c = mesh.coords_;
  // Color = the coordinates a group shares; key = the coordinate that varies inside it, so a
  // group's ranks are ordered by that coordinate (pp group rank i is pipeline stage i).
  ASSIGN_OR_RETURN(mesh.tp_, world.split(c.pp * layout.dp + c.dp, c.tp));
  ASSIGN_OR_RETURN(mesh.dp_, world.split(c.pp * layout.tp + c.tp, c.dp));
  ASSIGN_OR_RETURN(mesh.pp_, world.split(c.dp * layout.tp + c.tp, c.pp));
  return mesh;
}

}  // namespace partrain::runner
