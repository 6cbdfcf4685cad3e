#include "analyzers/link_model.h"

namespace partrain::analyzers {

Machines machines_from(const memory::GpuSpec& gpu, int gpus, int gpus_per_node,
                       const memory::ClusterSpec* cluster) {
  Machines m;
  m.gpus = gpus;
  m.gpus_per_node = gpus_per_node > 0 ? gpus_per_node : 8;
  m.intra_node = {gpu.intra_node_bandwidth * gpu.intra_node_efficiency, 2e-6};
  m.inter_node = {gpu.network_bandwidth * gpu.network_efficiency, 8e-6};
  m.source = "GPU preset " + gpu.name;
  if (cluster == nullptr) return m;
  auto use = [](double value, double& field) {
    if (value > 0) field = value;
  };
  if (gpus_per_node <= 0 && cluster->gpus_per_node > 0) {
    m.gpus_per_node = static_cast<int>(cluster->gpus_per_node);
  }
  use(cluster->intra_node_bandwidth, m.intra_node.bandwidth);
  use(cluster->intra_node_latency_s, m.intra_node.latency_s);
  use(cluster->inter_node_bandwidth, m.inter_node.bandwidth);
  use(cluster->inter_node_latency_s, m.inter_node.latency_s);
  m.source = "cluster " + cluster->name + " over GPU preset " + gpu.name;
  return m;
}

}  // namespace partrain::analyzers
