#include "analyzers/trace_data_loss.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "profiler/trace_open.h"

namespace partrain::analyzers {

StatusOr<std::vector<DataLossStat>> read_data_loss(const profiler::SqliteDb& db) {
  ASSIGN_OR_RETURN(auto stmt, profiler::SqliteStatement::prepare(
                                  db, "SELECT name, rank, value, description FROM stats "
                                      "WHERE severity = 'data_loss' ORDER BY name, rank"));
  std::vector<DataLossStat> losses;
  int rc = SQLITE_ROW;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    DataLossStat loss;
    loss.name = stmt.column_text(0);
    if (!stmt.column_is_null(1)) loss.rank = static_cast<int>(stmt.column_int(1));
    loss.value = stmt.column_int(2);
    loss.description = stmt.column_text(3);
    losses.push_back(std::move(loss));
  }
  if (rc != SQLITE_DONE)
    return profiler::trace_read_error(db, "reading the trace's data-loss stats");
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
