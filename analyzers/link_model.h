// The recommender's view of the machines: GPUs per node and an alpha-beta model per link level
// (NVLink inside a node, the NIC between nodes), from the GPU preset, a --cluster file, or
// calibrated from a trace.
#pragma once

#include <algorithm>
#include <string>

#include "memory/presets.h"

namespace partrain::analyzers {

enum class LinkLevel { kIntraNode, kInterNode };

struct Link {
  double bandwidth = 0;  // bytes/s per GPU per direction: the busbw a large collective reaches
  double latency_s = 0;  // per step of a collective (alpha)
};

// `ranks` computing at once on `devices` shared devices (0: one device each) each take
// ranks / devices times as long; never faster than alone.
inline double sharing_factor(int64_t ranks, int devices) {
  return devices > 0 && ranks > devices ? static_cast<double>(ranks) / devices : 1.0;
}

struct Machines {
  int gpus = 1;
  int gpus_per_node = 8;     // ranks per node
  int devices_per_node = 0;  // compute devices those ranks share; 0: one each (GPUs). Fewer on
                             // a CPU host (cores) or with several Gloo ranks on one GPU.
  Link intra_node;
  Link inter_node;
  std::string source;  // where the figures come from, for --explain

  // How much slower each rank computes while all ranks of a node compute at once.
  double device_sharing(int ranks) const {
    return sharing_factor(std::min<int64_t>(ranks, gpus_per_node), devices_per_node);
  }
  const Link& link(LinkLevel level) const {
    return level == LinkLevel::kIntraNode ? intra_node : inter_node;
  }
  // Groups of `size` ranks `stride` apart (memory::mesh_stride: Megatron's order) tile the ranks
  // in blocks of size x stride. Every group stays inside a node only when such a block fits a
  // node evenly; otherwise some group straddles two nodes (tp 3 on 8 GPUs a node: ranks 6-8), and
  // a collective runs at its slowest group's pace, the NIC's.
  LinkLevel level_of_group(int size, int stride) const {
    const int64_t span = static_cast<int64_t>(size) * stride;
    return span <= gpus_per_node && gpus_per_node % span == 0 ? LinkLevel::kIntraNode
                                                              : LinkLevel::kInterNode;
  }
};

// Defaults: NVLink and NIC bandwidth from the GPU preset, times its fitted busbw efficiencies;
// NCCL's per-step latency, about 2 us inside a node and 8 us across nodes (nccl-tests'
// small-message all-reduce times on DGX-class machines are 10-40 us over a handful of tree steps).
// A cluster file overrides any of them; gpus_per_node <= 0 takes the cluster's (or 8).
Machines machines_from(const memory::GpuSpec& gpu, int gpus, int gpus_per_node,
                       const memory::ClusterSpec* cluster);

}  // namespace partrain::analyzers
