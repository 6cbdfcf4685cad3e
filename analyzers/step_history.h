// Throughput and the step-by-step history the dashboard plots: tokens/s over a window of recent
// steps (one step's figure jumps with every hiccup of a loaded host), and each step as the run
// finished it: the slowest rank's time, the loss, the tokens. `partrain top` and `partrain
// analyze` both say tokens/s through tokens_per_second, so the figures agree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "analyzers/analysis_window.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

// The dashboard's throughput covers this many of the latest steps (docs/top.md).
inline constexpr int kThroughputWindowSteps = 10;

// Tokens per second of `tokens` as the ranks recorded them between start_ns and end_ns. Every
// rank of a data-parallel replica records its replica's tokens (runner/workload/trainer.cpp),
// so the sum is divided by the ranks per replica (tp x pp) to count each token once; a
// per-rank figure divided the same way is Megatron's tokens/s per GPU, and the ranks' figures
// add up to the run's. nullopt for an empty span or no tokens.
std::optional<double> tokens_per_second(int64_t tokens, int64_t start_ns, int64_t end_ns,
                                        int ranks_per_replica);

// Tokens per second over an analysis window's steps (`partrain analyze`): the tokens its ranks
// recorded in them, from the first step's start to the last one's end, each token once for a
// built-in workload (its config gives tp x pp). nullopt without steps or tokens.
StatusOr<std::optional<double>> window_tokens_per_second(const profiler::TraceReader& reader,
                                                         const AnalysisWindow& window);

// One step as every rank finished it.
struct StepPoint {
  int64_t step = 0;
  int64_t start_ns = 0;        // the first rank's start
  int64_t end_ns = 0;          // the last rank's end
  int64_t slowest_ns = 0;      // the longest rank's step time: what the run waited for
  int64_t tokens = 0;          // summed over the ranks as recorded (see tokens_per_second)
  std::optional<double> loss;  // the first rank that recorded one (the last pipeline stage's)
  int ranks = 0;               // ranks that recorded the step
};

// Adds one rank's record of `point.step` to `into` (the same step).
void merge_step(StepPoint& into, int64_t start_ns, int64_t dur_ns, int64_t tokens,
                std::optional<double> loss);

// "10 steps", "1 step": what a throughput figure covers, for labels.
std::string steps_phrase(int64_t steps);

}  // namespace partrain::analyzers
