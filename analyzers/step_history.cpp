#include "analyzers/step_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "analyzers/workload_run_config.h"
#include "profiler/trace_reader/step_reads.h"

namespace partrain::analyzers {

std::optional<double> tokens_per_second(int64_t tokens, int64_t start_ns, int64_t end_ns,
                                        int ranks_per_replica) {
  if (end_ns <= start_ns || tokens <= 0) return std::nullopt;
  return static_cast<double>(tokens) / std::max(ranks_per_replica, 1) /
         (static_cast<double>(end_ns - start_ns) / 1e9);
}

StatusOr<std::optional<double>> window_tokens_per_second(const profiler::TraceReader& reader,
                                                         const AnalysisWindow& window) {
  if (!window.has_steps) return std::optional<double>();
  ASSIGN_OR_RETURN(const std::optional<WorkloadRunConfig> config, read_workload_run_config(reader));
  const int per_replica =
      config ? std::max(config->resolved.layout.tp * config->resolved.layout.pp, 1) : 1;
  ASSIGN_OR_RETURN(profiler::StepCursor steps,
                   profiler::window_steps(reader, window.first_step, window.last_step));
  int64_t tokens = 0, start = INT64_MAX, end = INT64_MIN;
  profiler::StepRow step;
  while (steps.next(step)) {
    if (!window.ranks.empty() &&
        !std::binary_search(window.ranks.begin(), window.ranks.end(), step.rank)) {
      continue;
    }
    tokens += step.tokens.value_or(0);
    start = std::min(start, step.ts_ns);
    end = std::max(end, step.ts_ns + step.dur_ns);
  }
  RETURN_IF_ERROR(steps.status());
  return tokens_per_second(tokens, start, end, per_replica);
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
