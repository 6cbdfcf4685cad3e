#include "analyzers/uneven_steps.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <string>

#include "profiler/trace_reader/step_reads.h"

namespace partrain::analyzers {

GroupVisitor UnevenStepsPass::visitor() {
  GroupVisitor visitor;
  visitor.on_group = [this](const CollectiveGroup& group) {
    for (const CollectiveRow& row : group.rows) {
      if (row.step) ++ops_by_step_[row.rank][*row.step];
    }
  };
  return visitor;
}

namespace {

// The ranks whose steps may have ended where the run's end found them rather than where their
// inputs ran out: one that failed (an exit by a signal or a non-zero code, an uncaught exception,
// the run's failing rank), was killed (its connection to the collector ended without a goodbye)
// or lost its last records (a stat of severity data_loss naming it). nullopt: every rank, for a
// run still going (its last steps are not its ends), a run stopped from outside, or records lost
// of no rank in particular (a collector drain that timed out).
StatusOr<std::optional<std::set<int>>> ranks_stopped_from_outside(
    const profiler::TraceReader& reader) {
  using profiler::RunStatus;
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  if (run && (run->status == RunStatus::kRunning || run->status == RunStatus::kKilled)) {
    return std::optional<std::set<int>>();
  }
  std::set<int> stopped;
  if (run && run->failing_rank) stopped.insert(*run->failing_rank);
  ASSIGN_OR_RETURN(const std::vector<profiler::StatRow> stats, reader.stats());
  for (const profiler::StatRow& stat : stats) {
    const bool lost = stat.severity == profiler::StatSeverity::kDataLoss && stat.value > 0;
    const bool ended_badly =
        (stat.name == "collector_unclean_disconnects" || stat.name == "rank_uncaught_exception") &&
        stat.value > 0;
    if (lost && !stat.rank) return std::optional<std::set<int>>();
    if ((lost || ended_badly) && stat.rank) stopped.insert(*stat.rank);
  }
  ASSIGN_OR_RETURN(const std::vector<profiler::RankRow> ranks, reader.ranks());
  for (const profiler::RankRow& rank : ranks) {
    if (rank.exit_signal || (rank.exit_code && *rank.exit_code != 0)) stopped.insert(rank.rank);
  }
  return std::optional<std::set<int>>(std::move(stopped));
}

}  // namespace

StatusOr<std::optional<UnevenSteps>> UnevenStepsPass::finish(
    const profiler::TraceReader& reader) const {
  ASSIGN_OR_RETURN(const std::optional<std::set<int>> stopped, ranks_stopped_from_outside(reader));
  if (!stopped) return std::optional<UnevenSteps>();
  UnevenSteps uneven;
  int64_t longest = -1;
  for (const auto& [rank, ops] : ops_by_step_) {
    ASSIGN_OR_RETURN(const auto numbers, profiler::step_numbers(reader, rank));
    if (!numbers) continue;  // a rank that marks no steps says nothing of its inputs
    RankStepsRun run{rank, numbers->second, 0};
    for (auto it = ops.upper_bound(run.last_step); it != ops.end(); ++it) {
      run.collectives_after += it->second;
    }
    longest = std::max(longest, run.last_step);
    uneven.ranks.push_back(run);
  }
  const bool stopped_early_yet_communicating =
      std::any_of(uneven.ranks.begin(), uneven.ranks.end(), [&](const RankStepsRun& r) {
        return r.last_step < longest && r.collectives_after > 0 && !stopped->count(r.rank);
      });
  if (!stopped_early_yet_communicating) return std::optional<UnevenSteps>();
  return std::optional<UnevenSteps>(std::move(uneven));
}

std::vector<Finding> uneven_steps_findings(const std::optional<UnevenSteps>& uneven) {
  if (!uneven) return {};
  std::vector<std::string> parts;
  for (const RankStepsRun& r : uneven->ranks) {
    parts.push_back(fmt::format("rank {} stopped after step {}, then issued {} collective{}",
                                r.rank, r.last_step, r.collectives_after,
                                r.collectives_after == 1 ? "" : "s"));
  }
  Finding f;
  f.kind = "uneven_steps";
  f.severity = Severity::kWarning;
  f.impact = 1;
  f.evidence = fmt::format(
      "the ranks ran different numbers of steps while all kept issuing collectives: {} (uneven "
      "inputs: torch's Join context or DDP's join(), or data of different lengths per rank)",
      fmt::join(parts, "; "));
  f.advice =
      "the steps past the first rank's last are the longer ranks' only, and the ranks that ran "
      "out shadow the others' collectives without stepping: read the step and straggler figures "
      "over the steps every rank ran (--steps), or give every rank the same number of batches "
      "(DistributedSampler(drop_last=True)) if the imbalance is not intended";
  return {std::move(f)};
}

void account_for_uneven_steps(std::vector<Finding>& findings) {
  const bool uneven = std::any_of(findings.begin(), findings.end(),
                                  [](const Finding& f) { return f.kind == "uneven_steps"; });
  if (!uneven) return;
  for (Finding& f : findings) {
    if (f.kind != "straggler") continue;
    f.severity = Severity::kInfo;
    f.evidence +=
        "; the ranks ran different numbers of steps (uneven_steps), so its lateness "
        "may be the others' extra work rather than its own slowness";
  }
}

}  // namespace partrain::analyzers
