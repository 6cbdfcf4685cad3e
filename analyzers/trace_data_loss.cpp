#include "analyzers/trace_data_loss.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>


namespace partrain::analyzers {

StatusOr<std::vector<DataLossStat>> read_data_loss(const profiler::TraceReader& reader) {
  ASSIGN_OR_RETURN(const std::vector<profiler::StatRow> stats, reader.stats());
  std::vector<DataLossStat> losses;
  for (const profiler::StatRow& stat : stats) {
    if (stat.severity != profiler::StatSeverity::kDataLoss) continue;
    DataLossStat loss;
    loss.name = stat.name;
    loss.rank = stat.rank;
    loss.value = stat.value;
    loss.description = stat.description;
    losses.push_back(std::move(loss));
  }
  return losses;
}

namespace {

std::string describe(const DataLossStat& loss) {
  return fmt::format("{} = {}{}{}", loss.name, loss.value,
                     loss.rank ? fmt::format(" on rank {}", *loss.rank) : std::string(),
                     loss.description.empty() ? "" : " (" + loss.description + ")");
}

}  // namespace

std::vector<Finding> data_loss_findings(const std::vector<DataLossStat>& losses) {
  if (losses.empty()) return {};
  std::string evidence;
  bool stopped = false;
  for (const DataLossStat& loss : losses) {
    if (!evidence.empty()) evidence += "; ";
    evidence += describe(loss);
    stopped = stopped || loss.name == "trace_stopped";
  }
  Finding finding;
  finding.kind = "trace_data_loss";
  finding.severity = Severity::kWarning;
  finding.impact = 1;  // every other number is computed from what is left: it comes first
  finding.evidence = "the trace is missing events: " + evidence;
  finding.advice = stopped
                       ? "trace onto a disk with room (--trace FILE, -o FILE), or raise "
                         "--trace-max-size if the limit was what stopped it; until then the analyses cover only the time before "
                         "tracing stopped, and collectives missing at its end are artefacts"
                       : "the analyses cover only the events stored; collectives reported "
                         "missing may be lost records rather than ranks that never called them "
                         "(docs/reliability.md)";
  return {finding};
}

void discount_missing_collectives(std::vector<Finding>& findings,
                                  const std::vector<DataLossStat>& losses) {
  for (Finding& finding : findings) {
    if (finding.kind != "missing_collective") continue;
    const auto loss = std::find_if(losses.begin(), losses.end(), [&](const DataLossStat& l) {
      return l.value > 0 && (!l.rank || l.rank == finding.rank);
    });
    if (loss == losses.end()) continue;
    finding.severity = Severity::kWarning;
    finding.evidence +=
        fmt::format("; the trace lost events{}: {}",
                    loss->rank ? fmt::format(" of rank {}", *loss->rank) : "", describe(*loss));
    finding.advice =
        "likely a record lost from the trace, not an op the rank skipped: its other "
        "findings and exit status tell whether it failed; trace again, onto a disk "
        "nothing else locks or fills, to see every collective";
  }
}

void note_unclean_disconnects(std::vector<Finding>& findings, const std::vector<int>& ranks) {
  for (Finding& finding : findings) {
    if (finding.kind != "missing_collective" || !finding.rank) continue;
    if (std::find(ranks.begin(), ranks.end(), *finding.rank) == ranks.end()) continue;
    finding.evidence += fmt::format(
        "; rank {}'s connection to the collector ended without a goodbye (it was killed or "
        "crashed: collector_unclean_disconnects): the events it had not shipped yet are lost, "
        "so its last collectives may be missing though it issued them",
        *finding.rank);
    finding.advice = fmt::format(
        "rank {} was killed or crashed, and its last records may have gone with it: its exit "
        "and log (the launcher's failure summary) say how it ended; an op missing before its "
        "last recorded ones was skipped, one missing at its end may only be unshipped",
        *finding.rank);
  }
}

std::string format_data_loss(const std::vector<DataLossStat>& losses) {
  std::string out;
  for (const DataLossStat& loss : losses) {
    out += "the trace is missing events: " + describe(loss) + "\n";
  }
  return out;
}

nlohmann::json data_loss_json(const std::vector<DataLossStat>& losses) {
  nlohmann::json out = nlohmann::json::array();
  for (const DataLossStat& loss : losses) {
    out.push_back({{"name", loss.name},
                   {"rank", loss.rank ? nlohmann::json(*loss.rank) : nlohmann::json(nullptr)},
                   {"value", loss.value},
                   {"description", loss.description}});
  }
  return out;
}

}  // namespace partrain::analyzers
