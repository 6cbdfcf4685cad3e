// Collectives a rank issued after the last step it ended: outside every step window, so no other
// analysis counts them. A loop whose steps stop being marked (a new optimizer replaces the one
// that marks them while the old one stays referenced; docs/pytorch.md "Steps") or whose last
// iteration does much after optimizer.step() (the last checkpoint's barrier) loses that work from
// the report without a word; this says how much. One consumer of the shared pass over the
// collective groups.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "analyzers/collective_groups.h"
#include "analyzers/finding.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct RankAfterLastStep {
  int rank = 0;
  int64_t last_step = 0;    // the last step it ended
  int64_t collectives = 0;  // issued after that step ended (their step is a later one)
  double time_ms = 0;       // their own time, summed
  // From the end of its last step to the end of the last of them: the rank's time no step holds.
  double span_ms = 0;
  int64_t steps = 0;      // the steps it recorded
  double stepped_ms = 0;  // its first step's start to its last step's end
  // Its mean steady step: the steps after the first (the warm-up) to the last, per step; the
  // first alone when it recorded one.
  double step_ms = 0;
};

// A rank that recorded no step, yet its collectives carry one: a step began (PyTorch's step 0
// begins when the first optimizer is made) but none ended. A GradScaler that skipped every
// optimizer step (inf/NaN gradients) or a loop that never calls optimizer.step() leaves this.
struct RankWithoutStepEnd {
  int rank = 0;
  int64_t first_step = 0;   // the lowest step its collectives carry
  int64_t collectives = 0;  // carrying a step
};

// By rank; only ranks that issued collectives after their last step, among those that ended the
// trace's last step (a rank that stopped early is uneven_steps' to report), and only collectives
// that completed. Empty while the run is still running (its ranks' current steps have yet to
// end) and for a run that did not end normally (failed, killed, incomplete: its last iteration
// was cut short, which the failure's findings tell).
struct AfterLastStep {
  std::vector<RankAfterLastStep> ranks;
  std::vector<RankWithoutStepEnd> never_ended;  // by rank; only when no rank ended a step
};

// One collective after the last step is the loop's ordinary tail (the last iteration's loss
// all-reduce for logging): not worth a word. Two or more that span at least the rank's mean
// step are.
inline constexpr int64_t kTrailingCollectivesWorthSaying = 2;

class AfterLastStepPass {
 public:
  GroupVisitor visitor();  // valid while this pass lives
  StatusOr<AfterLastStep> finish(const profiler::TraceReader& reader) const;

 private:
  struct Tally {
    int64_t ops = 0;
    int64_t time_ns = 0;
    int64_t last_end_ns = 0;
  };
  std::map<int, std::map<int64_t, Tally>> by_step_;  // rank -> the step it was in -> its ops
};

// An info finding when any rank's trailing collectives are worth saying, and a warning when
// ranks began a step but ended none.
std::vector<Finding> after_last_step_findings(const AfterLastStep& after);
nlohmann::json after_last_step_json(const AfterLastStep& after);

}  // namespace partrain::analyzers
