// Streams the `collectives` view one matched group at a time: every row of one (comm_id, seq),
// over all ranks, ordered by communicator and sequence number. Each communicator is read with
// its own index-ordered query (collective_comm_seq), so memory holds one group, never the trace.
// Shared by the collective statistics and the straggler analysis, which `partrain analyze` feeds
// from one pass (visit_all): reading the groups is most of what either costs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/analysis_window.h"
#include "core/status.h"
#include "profiler/sqlite_db.h"

namespace partrain::analyzers {

struct CollectiveRow {
  int rank = 0;
  std::string_view op;      // valid while the pass runs (interned once per pass)
  int64_t bytes = 0;
  std::optional<int> peer;  // send/recv peer or root, as a world rank
  int64_t ts_ns = 0;        // host start
  int64_t time_ns = 0;      // gpu_end - gpu_start when measured, else dur_ns
  int group_size = 0;
  std::string_view group_ranks;  // "0,1,2,3"; valid while the pass runs
  bool completed = false;
  bool in_window = false;   // an analysed rank, started inside its span
};

struct CollectiveGroup {
  std::string comm_id;
  int64_t seq = 0;
  std::vector<CollectiveRow> rows;
  bool in_window() const;  // any row in the window
};

bool is_p2p(std::string_view op);
// "0,1,3" -> {0, 1, 3}; malformed entries are skipped.
std::vector<int> parse_rank_list(std::string_view text);

// Called once per group in (comm_id, seq) order, and once per communicator after its last group
// (on_comm_end), so callers can settle what needs a communicator's whole history.
struct GroupVisitor {
  std::function<void(const CollectiveGroup&)> on_group;
  std::function<void(const std::string& comm_id)> on_comm_end;
};
Status for_each_collective_group(const profiler::SqliteDb& db, const AnalysisWindow& window,
                                 const GroupVisitor& visitor);
// One visitor that calls each of `visitors` in turn, so several analyses share one pass.
GroupVisitor visit_all(std::vector<GroupVisitor> visitors);

// True when the run is over (any status but `running`), so a rank that never recorded an op
// will not record it later.
StatusOr<bool> run_has_ended(const profiler::SqliteDb& db);

}  // namespace partrain::analyzers
