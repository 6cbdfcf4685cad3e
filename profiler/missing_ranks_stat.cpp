#include "profiler/missing_ranks_stat.h"

#include <fmt/format.h>

#include "core/rank_list.h"

namespace partrain::profiler {

std::string missing_ranks_description(const std::vector<int>& missing, int64_t world_size) {
  return fmt::format(
      "{} of the world of {} had no trace file: their events and their part of every collective "
      "are absent",
      ranks_phrase(missing), world_size);
}

}  // namespace partrain::profiler
