#include "runner/workload/mesh.h"

namespace partrain::runner {

using memory::MeshAxis;

StatusOr<Mesh> Mesh::build(comm::Comm& world, const ResolvedLayout& layout, bool experts) {
  const TrainingLayout& l = layout.layout;
  if (world.size() != memory::layout_ranks(l)) {
    return invalid_argument("the layout needs {} ranks but the world has {}",
                            memory::layout_ranks(l), world.size());
  }
  Mesh mesh;
  mesh.world_ = &world;
  mesh.coords_ = memory::mesh_coords(world.rank(), l);
  // Color = the group's index (the communicators' names in a trace, "world/split0/color1", carry
  // it); key = the coordinate along the axis, so a group's ranks are ordered by it (pp group
  // rank i is pipeline stage i).
  auto split = [&](MeshAxis axis) {
    return world.split(memory::mesh_group(world.rank(), axis, l), mesh.coords_[axis]);
  };
  ASSIGN_OR_RETURN(mesh.tp_, split(MeshAxis::kTp));
  ASSIGN_OR_RETURN(mesh.dp_, split(MeshAxis::kDp));
  ASSIGN_OR_RETURN(mesh.pp_, split(MeshAxis::kPp));
  if (experts) {
    const memory::ExpertCoords expert = memory::expert_coords(mesh.coords_, l);
    ASSIGN_OR_RETURN(mesh.ep_, world.split(memory::expert_group(world.rank(), l), expert.ep));
    ASSIGN_OR_RETURN(mesh.expert_data_,
                     world.split(memory::expert_data_group(world.rank(), l), expert.expert_data));
  }
  if (memory::zero_replicas(l) > 1) {
    // Splits of the dp group (the workloads run no cp: it holds every data rank, in order), so
    // that a trace names them after it ("dp 0 shard 1", profiler::communicator_name).
    const memory::ShardCoords shard = memory::shard_coords(mesh.coords_, l);
    ASSIGN_OR_RETURN(mesh.zero_shard_, mesh.dp_->split(shard.replica, shard.shard));
    ASSIGN_OR_RETURN(mesh.zero_replicas_, mesh.dp_->split(shard.shard, shard.replica));
  }
  return mesh;
}

}  // namespace partrain::runner
