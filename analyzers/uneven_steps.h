// Ranks that ran different numbers of steps while issuing collectives to the end: uneven inputs
// (torch's Join context, DDP's join(), data loaders of different lengths per rank). A rank out of
// batches keeps joining the others' collectives without stepping, so its steps stop early, the
// window's later steps are the others' only, and a rank that steps longest looks like a
// straggler. One consumer of the shared pass over the collective groups.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "analyzers/collective_groups.h"
#include "analyzers/finding.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct RankStepsRun {
  int rank = 0;
  int64_t last_step = 0;          // the last step it recorded
  int64_t collectives_after = 0;  // ops it issued after that step ended
};

// Set only when the ranks' last steps differ and a rank that stopped early issued collectives
// after its last step, of a run that has ended, and the rank ended by itself: a rank that failed,
// was killed or lost its last records stopped where that found it, not where its inputs ran out,
// and a run killed from outside, or still running, has no ends of its inputs to compare. By rank.
struct UnevenSteps {
  std::vector<RankStepsRun> ranks;
};

class UnevenStepsPass {
 public:
  GroupVisitor visitor();  // valid while this pass lives
  StatusOr<std::optional<UnevenSteps>> finish(const profiler::TraceReader& reader) const;

 private:
  std::map<int, std::map<int64_t, int64_t>> ops_by_step_;  // rank -> its step -> ops issued
};

std::vector<Finding> uneven_steps_findings(const std::optional<UnevenSteps>& uneven);

// With uneven steps, a straggler finding weighs ranks that did different work: it says so, and
// is information rather than a warning.
void account_for_uneven_steps(std::vector<Finding>& findings);

}  // namespace partrain::analyzers
