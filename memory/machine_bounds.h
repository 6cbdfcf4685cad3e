// Bounds of the machine counts a --gpu-file or a --cluster file may give, shared with the
// recommender's flags: the recommender holds them as int, and a node or a GPU past them is a
// typo or a damaged file, not a machine (2^32 GPUs a node narrowed to 0: a division by zero).
#pragma once

#include <cstdint>

namespace partrain::memory {

inline constexpr int64_t kMostGpusPerNode = 1 << 16;  // --gpus-per-node, cluster gpus_per_node
inline constexpr int64_t kMostSmCount = 1 << 16;      // a GPU file's sm_count

}  // namespace partrain::memory
