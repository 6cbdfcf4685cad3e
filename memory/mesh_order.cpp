#include "memory/mesh_order.h"

namespace partrain::memory {
namespace {

// Each axis's degree in the layout and coordinate in MeshCoords, indexed by MeshAxis.
struct Axis {
  int TrainingLayout::*degree;
  int MeshCoords::*coordinate;
};
constexpr Axis kAxes[] = {{&TrainingLayout::tp, &MeshCoords::tp},
                          {&TrainingLayout::cp, &MeshCoords::cp},
                          {&TrainingLayout::dp, &MeshCoords::dp},
                          {&TrainingLayout::pp, &MeshCoords::pp}};

const Axis& axis_of(MeshAxis axis) { return kAxes[static_cast<size_t>(axis)]; }
int axis_size(MeshAxis axis, const TrainingLayout& l) { return l.*axis_of(axis).degree; }

}  // namespace

int& MeshCoords::operator[](MeshAxis axis) { return this->*axis_of(axis).coordinate; }
int MeshCoords::operator[](MeshAxis axis) const { return this->*axis_of(axis).coordinate; }

MeshCoords mesh_coords(int rank, const TrainingLayout& layout) {
  MeshCoords coords;
  for (MeshAxis axis : kMeshOrder) {
    coords[axis] = rank % axis_size(axis, layout);
    rank /= axis_size(axis, layout);
  }
  return coords;
}

int mesh_rank(const MeshCoords& coords, const TrainingLayout& layout) {
  int rank = 0;
  for (MeshAxis axis : kMeshOrder) rank += coords[axis] * mesh_stride(axis, layout);
  return rank;
}

int mesh_stride(MeshAxis axis, const TrainingLayout& layout) {
  int stride = 1;
  for (MeshAxis inner : kMeshOrder) {
    if (inner == axis) break;
    stride *= axis_size(inner, layout);
  }
  return stride;
}

int mesh_group(int rank, MeshAxis axis, const TrainingLayout& layout) {
  const MeshCoords coords = mesh_coords(rank, layout);
  int group = 0, stride = 1;
  for (MeshAxis other : kMeshOrder) {
    if (other == axis) continue;
    group += coords[other] * stride;
    stride *= axis_size(other, layout);
  }
  return group;
}

namespace {

// The data ranks (dp x cp, cp fastest) cut into groups of `inner` neighbours: a rank's place in
// its group and its group's index. Ranks with the same tp, pp and group index form an inner group;
// those with the same tp, pp and place an outer one (the groups' replicas). Expert parallelism
// cuts by ep, a hybrid ZeRO by its shard.
struct DataSplit {
  int inner = 0;
  int outer = 0;
};
DataSplit split_data(const MeshCoords& coords, const TrainingLayout& layout, int inner) {
  const int data = coords.dp * layout.cp + coords.cp;
  return {.inner = data % inner, .outer = data / inner};
}
int inner_group(int rank, const TrainingLayout& layout, int inner) {
  const MeshCoords coords = mesh_coords(rank, layout);
  const int groups = layout.dp * layout.cp / inner;
  return (coords.pp * groups + split_data(coords, layout, inner).outer) * layout.tp + coords.tp;
}
int outer_group(int rank, const TrainingLayout& layout, int inner) {
  const MeshCoords coords = mesh_coords(rank, layout);
  return (coords.pp * inner + split_data(coords, layout, inner).inner) * layout.tp + coords.tp;
}

}  // namespace

int expert_stride(const TrainingLayout& layout) { return mesh_stride(MeshAxis::kCp, layout); }

int zero_replica_stride(const TrainingLayout& layout) {
  return mesh_stride(MeshAxis::kCp, layout) * zero_shard_ranks(layout);
}

int expert_data_stride(const TrainingLayout& layout) { return expert_stride(layout) * layout.ep; }

ExpertCoords expert_coords(const MeshCoords& coords, const TrainingLayout& layout) {
  const DataSplit split = split_data(coords, layout, layout.ep);
  return {.ep = split.inner, .expert_data = split.outer};
}

int expert_group(int rank, const TrainingLayout& layout) {
  return inner_group(rank, layout, layout.ep);
}

int expert_data_group(int rank, const TrainingLayout& layout) {
  return outer_group(rank, layout, layout.ep);
}

ShardCoords shard_coords(const MeshCoords& coords, const TrainingLayout& layout) {
  const DataSplit split = split_data(coords, layout, zero_shard_ranks(layout));
  return {.shard = split.inner, .replica = split.outer};
}

int zero_shard_group(int rank, const TrainingLayout& layout) {
  return inner_group(rank, layout, zero_shard_ranks(layout));
}

int zero_replica_group(int rank, const TrainingLayout& layout) {
  return outer_group(rank, layout, zero_shard_ranks(layout));
}

}  // namespace partrain::memory
