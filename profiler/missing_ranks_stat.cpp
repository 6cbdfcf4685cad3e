#include "profiler/missing_ranks_stat.h"

#include <fmt/format.h>

namespace partrain::profiler {

std::string missing_ranks_description(std::string_view missing_ranks, int64_t world_size) {
  return fmt::format(
      "{} of the world of {} had no trace file: their events and their part of every collective "
      "are absent",
      missing_ranks, world_size);
}

}  // namespace partrain::profiler
