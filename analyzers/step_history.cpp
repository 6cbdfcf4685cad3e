#include "analyzers/step_history.h"

#include <fmt/format.h>

#include <algorithm>

namespace partrain::analyzers {

std::optional<double> tokens_per_second(int64_t tokens, int64_t start_ns, int64_t end_ns,
                                        int ranks_per_replica) {
  if (end_ns <= start_ns || tokens <= 0) return std::nullopt;
  return static_cast<double>(tokens) / std::max(ranks_per_replica, 1) /
         (static_cast<double>(end_ns - start_ns) / 1e9);
}

void merge_step(StepPoint& into, int64_t start_ns, int64_t dur_ns, int64_t tokens,
                std::optional<double> loss) {
  const int64_t end_ns = start_ns + dur_ns;
  into.start_ns = into.ranks == 0 ? start_ns : std::min(into.start_ns, start_ns);
  into.end_ns = into.ranks == 0 ? end_ns : std::max(into.end_ns, end_ns);
  into.slowest_ns = std::max(into.slowest_ns, dur_ns);
  into.tokens += tokens;
  if (!into.loss) into.loss = loss;
  ++into.ranks;
}

std::string steps_phrase(int64_t steps) {
  return fmt::format("{} step{}", steps, steps == 1 ? "" : "s");
}

}  // namespace partrain::analyzers
