// Collective statistics of `partrain analyze`: the ops in the analysis window grouped by
// communicator, op and size bucket (count, bytes, time p50/p99, algbw/busbw as nccl-tests
// computes them, cross-rank arrival skew), and the matching of each (comm_id, seq) across the
// communicator's members that finds desyncs and ops a member never recorded.
// Definitions: docs/analysis-collectives.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/collective_groups.h"
#include "analyzers/finding.h"
#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

// One (communicator, op, size bucket) row of the table.
struct CollectiveStatsRow {
  std::string comm_id;
  std::string op;
  std::string label;        // what the caller said the ops are for (moe_dispatch); empty: none
  int64_t size_bucket = 0;  // 2^floor(log2(bytes)): ops of [bucket, 2 x bucket) bytes
  int group_size = 0;       // n in the busbw factor
  int64_t count = 0;        // completed ops on analysed ranks in the window (one per rank)
  int64_t bytes = 0;        // their sizes S, summed
  double time_p50_ms = 0;
  double time_p99_ms = 0;
  double algbw_gbps = 0;    // sum of S / sum of time
  double busbw_gbps = 0;    // algbw x the op's factor (analyzers/bandwidth.h)
  int64_t matched = 0;      // (comm_id, seq) groups with two or more members recorded
  double skew_p50_ms = 0;   // last start - first start per matched group
  double skew_p99_ms = 0;

  bool sized = false;  // some op of the row has a known size, 0 B included

  // No op of the row has a recorded size (a Kineto trace profiled without record_shapes, a
  // barrier): its size, bytes and bandwidths are unknown, not zero. Ops of empty tensors have
  // 0 B, and no bandwidth (nothing moved).
  bool size_known() const { return bytes > 0 || sized; }
  bool bandwidth_known() const { return bytes > 0; }
  // One op's message, the row's mean (ops of one bucket may differ a little).
  int64_t size_bytes() const { return count > 0 ? bytes / count : 0; }
};

struct DesyncMember {
  int rank = 0;
  std::string op;
  int64_t bytes = 0;
};
// The first mismatch on a communicator; later ones on it are counted, not listed.
struct Desync {
  std::string comm_id;
  int64_t seq = 0;
  std::vector<DesyncMember> members;  // by rank
  int64_t later_mismatches = 0;
};

// Consecutive sequence numbers of one communicator that a member never recorded while others did.
struct MissingCollective {
  std::string comm_id;
  int rank = 0;
  // What the others did: at first_seq first, then every other op of the run as it first came.
  std::vector<std::string> ops;
  int64_t first_seq = 0;
  int64_t last_seq = 0;
  int64_t count = 0;          // sequence numbers in the run
  std::vector<int> present;   // members that recorded first_seq
  std::optional<int64_t> step;  // the step they were in at first_seq, when they mark steps
};

// One comm_id that ranks recorded with different member lists: two groups under one name (c10d's
// names diverge when new_group(..., use_local_synchronization=True) is called by some ranks
// only), so its ops cannot be matched across ranks.
struct MembershipConflict {
  std::string comm_id;
  std::map<int, std::string> members;  // rank -> the group_ranks it recorded ("0,2")
};

struct CollectiveStatsReport {
  std::vector<CollectiveStatsRow> rows;  // by comm_id, op, size bucket
  std::vector<Desync> desyncs;           // one per desynced communicator
  std::vector<MembershipConflict> conflicts;  // one per communicator whose members disagree
  std::vector<MissingCollective> missing;  // at most kMaxMissing
  int64_t missing_total = 0;             // missing (comm, seq, rank), listed or not
  int64_t ops = 0;                       // rows counted in the table
  int64_t groups = 0;                    // (comm_id, seq) groups in the window
  bool run_ended = true;
  // The trace says its profiler recorded shapes (an import of torch.profiler's traces with
  // record_shapes=True): an op without a size was not sized by the trace, not left unrecorded.
  bool shapes_recorded = false;
  static constexpr size_t kMaxMissing = 64;
};

// Size bucket of an op of `bytes` bytes (0 for 0 bytes), and nccl-tests' way to print it (bytes).
int64_t size_bucket(int64_t bytes);

namespace detail {
class StatsCollector;
}

// The statistics as one consumer of a pass over the groups (for_each_collective_group), so
// `partrain analyze` reads the groups once for them and the straggler analysis together.
class CollectiveStatsPass {
 public:
  explicit CollectiveStatsPass(bool run_ended);  // run_has_ended(reader)
  ~CollectiveStatsPass();
  CollectiveStatsPass(const CollectiveStatsPass&) = delete;
  CollectiveStatsPass& operator=(const CollectiveStatsPass&) = delete;
  // Valid while this pass lives.
  GroupVisitor visitor();
  // Once, after the pass has seen every group.
  CollectiveStatsReport finish();

 private:
  std::unique_ptr<detail::StatsCollector> collector_;
};

// Whether the run's config says its profiler recorded shapes (CollectiveStatsReport).
StatusOr<bool> run_recorded_shapes(const profiler::TraceReader& reader);

// A pass of its own over the window's groups.
StatusOr<CollectiveStatsReport> analyze_collective_stats(const profiler::TraceReader& reader,
                                                         const AnalysisWindow& window);
std::vector<Finding> collective_stats_findings(const CollectiveStatsReport& report);
std::string format_collective_stats(const CollectiveStatsReport& report);
// The rows by (communicator, op, size bucket): the report's "collectives" list.
nlohmann::json collective_stats_json(const CollectiveStatsReport& report);
// How the ranks' records matched: groups, desyncs, missing ranks ("collective_matching").
nlohmann::json collective_matching_json(const CollectiveStatsReport& report);

}  // namespace partrain::analyzers
