#include "analyzers/trace_data_loss.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "profiler/trace_reader/damaged_rows.h"

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
  // Rows whose values cannot be true: the reads left them out or read them as not recorded.
  ASSIGN_OR_RETURN(const std::vector<profiler::DamagedRows> damaged,
                   profiler::damaged_rows(reader));
  for (const profiler::DamagedRows& rows : damaged) {
    losses.push_back({rows.name, rows.rank, rows.rows, rows.description, true});
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
  bool stopped = false, damaged = false;
  for (const DataLossStat& loss : losses) {
    if (!evidence.empty()) evidence += "; ";
    evidence += describe(loss);
    stopped = stopped || loss.name == "trace_stopped";
    damaged = damaged || loss.damaged_rows;
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
  if (damaged) {
    finding.advice +=
        "; rows whose values cannot be true (the file was damaged or edited) are left out or "
        "read as not recorded, never shown as measured: analyse an intact copy for full figures";
  }
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

void discount_unrecorded_compute(std::vector<Finding>& findings,
                                 const std::vector<DataLossStat>& losses) {
  const auto undecoded = std::find_if(losses.begin(), losses.end(), [](const DataLossStat& l) {
    return l.name == "track_kind_unknown" && l.value > 0;
  });
  if (undecoded == losses.end()) return;
  for (Finding& finding : findings) {
    if (finding.kind != "compute_unrecorded") continue;
    finding.evidence += "; but the trace holds events it could not decode: " + describe(*undecoded);
    finding.advice =
        "the compute may have been recorded and lost with the undecodable rows (the file was "
        "damaged, see the trace_data_loss finding): analyse an intact copy of the trace before "
        "profiling the program again";
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
