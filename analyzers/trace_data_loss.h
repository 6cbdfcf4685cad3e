// What the trace itself says it is missing: the stat rows of severity data_loss (tracing stopped
// on a full disk, events a rank dropped, a writer that died, connections cut), and the rows the
// reads could not use (profiler/trace_reader/damaged_rows.h). `partrain analyze`
// reports them first, because every other section only sees what was stored.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/finding.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct DataLossStat {
  std::string name;         // "trace_stopped", "rank_dropped_records", "run_incomplete", ...
  std::optional<int> rank;  // none: the whole run
  int64_t value = 0;        // how many (events, connections), as the stat counts
  std::string description;
  bool damaged_rows = false;  // rows the trace holds but whose values cannot be true
};

StatusOr<std::vector<DataLossStat>> read_data_loss(const profiler::TraceReader& reader);
// One warning naming every loss, or none when the trace is whole.
std::vector<Finding> data_loss_findings(const std::vector<DataLossStat>& losses);
// A collective a rank "never recorded" is no evidence against a rank whose events the trace lost
// (a loss of that rank, or of the whole run: a recorder that dropped events, a writer that could
// not store them or stopped): its missing_collective findings become warnings that name the loss
// and say the record was likely lost, instead of critical ones that say the rank crashed, hung or
// skipped the op.
void discount_missing_collectives(std::vector<Finding>& findings,
                                  const std::vector<DataLossStat>& losses);
// A compute_unrecorded finding where the trace holds slices it could not decode (tracks of a
// kind no partrain writes): the compute may be among them, so the finding names the loss and
// stops advising to profile the program again.
void discount_unrecorded_compute(std::vector<Finding>& findings,
                                 const std::vector<DataLossStat>& losses);
// A rank whose connection to the collector ended without a goodbye (stat
// collector_unclean_disconnects: it was killed or crashed) lost the events it had not shipped:
// its missing_collective findings say their ops may be among them. They stay as grave as they
// were: a rank that skipped an op and was then killed leaves the same trace.
void note_unclean_disconnects(std::vector<Finding>& findings, const std::vector<int>& ranks);
// The report header's lines: "the trace is missing events: trace_stopped = 5454 (...)\n" per
// loss; "" for none.
std::string format_data_loss(const std::vector<DataLossStat>& losses);
nlohmann::json data_loss_json(const std::vector<DataLossStat>& losses);

}  // namespace partrain::analyzers
