// The name a user knows a communicator by, from the id the trace stores: `partrain top`,
// `partrain analyze` and `partrain export` all show communicators through this one function.
// partrain's built-in workloads split the world into their mesh's groups (runner/workload/
// mesh.cpp: tp, then dp, then pp, each colour the group's index; runner/workload/
// training_rank.cpp: each pipeline's activation, gradient and tied-embedding channels), so
// "world/split1/color0" is "dp 0". PyTorch's groups keep PyTorch's names ("default_pg:0",
// "mesh_dp:3": profiler::torch_comm_id); any other id is shown as it is.
#pragma once

#include <string>
#include <string_view>

namespace partrain::profiler {

// "world", "tp 1", "dp 0", "pp 0", "pp 0 activations", "pp 0 gradients", "embedding 0", a
// hybrid ZeRO's "dp 0 shard 1" and "dp 0 replicas 0", or `comm_id` itself.
std::string communicator_name(std::string_view comm_id);

// The order communicators are listed in: digit runs compared as numbers, so "tp 2"
// ("world/split0/color2") comes before "tp 10" and "mesh_dp:9" before "mesh_dp:10"; ids that
// read as the same numbers ("pg:01", "pg:1") in byte order. A strict weak order for sorting
// and std::map.
bool communicator_before(std::string_view a, std::string_view b);

}  // namespace partrain::profiler
