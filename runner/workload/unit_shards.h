// Per-unit sharding of a rank's parameters over the dp group for ZeRO-2 and FSDP: every unit is
// padded with zeros to a multiple of dp and each dp rank owns 1/dp of every unit, as each FSDP
// unit owns its own padded FlatParameter. A unit's reduce-scatter then lands exactly in its
// owners' shards and its all-gather reads them back, one collective per unit.
#pragma once

#include <cstdint>
#include <vector>

#include "runner/workload/param_layout.h"

namespace partrain::runner {

struct UnitShard {
  int64_t numel = 0;           // the unit's real elements
  int64_t shard = 0;           // ceil(numel / dp): what each rank owns
  int64_t padded_offset = 0;   // in a buffer of every unit padded to shard x dp
  int64_t shard_offset = 0;    // in this rank's shard buffer (every unit's owned slice, in order)
  int64_t owned_begin = 0;     // unit-local [begin, end) of the real elements this rank owns
  int64_t owned_end = 0;
};

class UnitShards {
 public:
  UnitShards(const ParamLayout& layout, int dp_size, int dp_rank);

  const UnitShard& unit(size_t index) const { return units_[index]; }
  size_t size() const { return units_.size(); }
  int dp_rank() const { return dp_rank_; }
  // Elements of a buffer holding every unit padded (sum of shard x dp).
  int64_t padded_numel() const { return padded_numel_; }
  // Elements of this rank's shard buffer (sum of shard): the padded total over dp.
  int64_t shard_numel() const { return shard_numel_; }

 private:
  std::vector<UnitShard> units_;
  int dp_rank_ = 0;
  int64_t padded_numel_ = 0;
  int64_t shard_numel_ = 0;
};

}  // namespace partrain::runner
