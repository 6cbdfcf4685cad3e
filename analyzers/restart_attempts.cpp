// Findings of a job torchrun restarted, told apart by the attempt a comm id names.
#include "analyzers/restart_attempts.h"

#include <fmt/format.h>

#include <charconv>
#include <string_view>

namespace partrain::analyzers {

namespace {

// The torchrun attempt whose group a comm id names: N for "...@restartN", else 0.
int comm_attempt(std::string_view comm_id) {
  constexpr std::string_view kRestart = "@restart";
  const size_t at = comm_id.rfind(kRestart);
  if (at == std::string_view::npos) return 0;
  const std::string_view digits = comm_id.substr(at + kRestart.size());
  int attempt = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), attempt);
  return error == std::errc() && end == digits.data() + digits.size() ? attempt : 0;
}

}  // namespace

void forget_earlier_attempts_steps(CollectiveStatsReport& report, int restarts) {
  for (MissingCollective& m : report.missing) {
    if (comm_attempt(m.comm_id) < restarts) m.step.reset();
  }
}

std::vector<Finding> collective_findings_by_attempt(const CollectiveStatsReport& report,
                                                    const RunOutcome& outcome) {
  if (outcome.restarts == 0) return collective_stats_findings(report);
  CollectiveStatsReport earlier_unstepped = report;
  forget_earlier_attempts_steps(earlier_unstepped, outcome.restarts);
  std::vector<Finding> findings = collective_stats_findings(earlier_unstepped);
  // One missing_collective finding per missing run, in the report's order.
  size_t next = 0;
  for (Finding& finding : findings) {
    if (finding.kind != "missing_collective") continue;
    const int attempt = comm_attempt(earlier_unstepped.missing[next++].comm_id);
    if (attempt >= outcome.restarts) continue;
    finding.evidence += fmt::format(
        "; this was attempt {} of the job, which torchrun then restarted (the last attempt is {})",
        attempt, outcome.restarts);
    if (outcome.status != "completed") continue;
    finding.severity = Severity::kWarning;
    finding.impact = 0;  // the step times analysed are the last attempt's, which it did not slow
    finding.advice = fmt::format(
        "torchrun recovered from it and the last attempt completed: rank {}'s output of attempt "
        "{} says why it stopped there (a crash, a hang, a kill); the restart cost the work since "
        "the last checkpoint",
        *finding.rank, attempt);
  }
  return findings;
}

}  // namespace partrain::analyzers
