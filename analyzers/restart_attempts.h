// Findings of a job torchrun restarted (--max-restarts), told apart by attempt.
#pragma once

#include <vector>

#include "analyzers/analysis_report.h"
#include "analyzers/collective_stats.h"
#include "analyzers/finding.h"

namespace partrain::analyzers {

// Leaves out the step of each op missing on an earlier attempt's communicator than the last
// (`restarts`; the last attempt's comm ids end "@restartN"): the steps the trace keeps are the
// last attempt's, under the same numbers, so the step resolved for it is another attempt's. For
// the Collectives section as for the findings.
void forget_earlier_attempts_steps(CollectiveStatsReport& report, int restarts);

// The collectives' findings (collective_stats_findings), told apart by torchrun attempt when it
// restarted the job (outcome.restarts > 0): an op missing on an earlier attempt's communicator
// says which attempt it was in, without the step; when the run then completed, torchrun
// recovered from it: a warning of no impact, not the run's critical.
std::vector<Finding> collective_findings_by_attempt(const CollectiveStatsReport& report,
                                                    const RunOutcome& outcome);

}  // namespace partrain::analyzers
