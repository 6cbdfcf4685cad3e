#include "runner/workload/unit_shards.h"

#include <algorithm>

namespace partrain::runner {

UnitShards::UnitShards(const ParamLayout& layout, int dp_size, int dp_rank) : dp_rank_(dp_rank) {
  for (const ParamUnit& unit : layout.units()) {
    UnitShard s;
    s.numel = unit.numel;
    s.shard = (unit.numel + dp_size - 1) / dp_size;
    s.padded_offset = padded_numel_;
    s.shard_offset = shard_numel_;
    s.owned_begin = std::min(unit.numel, dp_rank * s.shard);
    s.owned_end = std::min(unit.numel, (dp_rank + 1) * s.shard);
    padded_numel_ += s.shard * dp_size;
    shard_numel_ += s.shard;
    units_.push_back(s);
  }
}

}  // namespace partrain::runner
