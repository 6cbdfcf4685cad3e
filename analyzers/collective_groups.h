// Streams the collectives one matched group at a time: every rank's row of one (comm_id, seq),
// ordered by communicator and sequence number. Each communicator is read by the reader's
// index-ordered cursor (collective_comm_seq), so memory holds one group, never the trace.
// Shared by the collective statistics and the straggler analysis, which `partrain analyze` feeds
// from one pass (visit_all): reading the groups is most of what either costs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analyzers/analysis_window.h"
#include "core/status.h"
#include "profiler/p2p_seq.h"
#include "profiler/trace_reader/collective_reads.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

struct CollectiveRow {
  int rank = 0;
  std::string_view op;      // valid while the reader lives
  std::string_view label;   // what its caller said it is for (moe_dispatch); empty: none
  int64_t bytes = 0;
  // Its size is known: bytes > 0, or tensors of a known dtype with no elements (a PyTorch
  // collective of an empty tensor, PowerSGD's). A source that did not know the size (a Kineto
  // trace without record_shapes) wrote 0 bytes of dtype "other"; a barrier has no size.
  bool sized = false;
  std::optional<int> peer;  // send/recv peer or root, as a world rank
  int64_t ts_ns = 0;        // host start
  int64_t end_ns = 0;       // host end
  int64_t time_ns = 0;      // gpu_end - gpu_start when measured, else dur_ns
  int group_size = 0;
  std::string_view group_ranks;  // "0,1,2,3"; valid while the reader lives
  bool completed = false;
  bool in_window = false;   // an analysed rank, started inside its span
  std::optional<int64_t> step;  // the rank's step, when it marks steps
};

struct CollectiveGroup {
  std::string comm_id;
  int64_t seq = 0;
  std::vector<CollectiveRow> rows;
  bool in_window() const;  // any row in the window
};

// The row a pass hands on for one rank's record: its time is the GPU's when measured. Without
// a window, in_window is false.
CollectiveRow collective_row(const profiler::CollectiveOp& op);
CollectiveRow collective_row(const profiler::CollectiveOp& op, const AnalysisWindow& window);

// When a group's members arrived: the first and the last start, and who came last (the first
// of them on a tie). Skew = last start - first start.
struct GroupArrival {
  int64_t first_start_ns = 0;
  int64_t last_start_ns = 0;
  int last_rank = 0;
  int64_t skew_ns() const { return last_start_ns - first_start_ns; }
};
// `rows` must not be empty.
GroupArrival arrival_of(std::span<const CollectiveRow* const> rows);
GroupArrival arrival_of(std::span<const CollectiveRow> rows);
using profiler::is_p2p;  // profiler/p2p_seq.h
// A communicator's stored member list ("0,1,3" -> {0, 1, 3}); malformed entries are skipped.
std::vector<int> parse_group_ranks(std::string_view text);

// Called once per group in (comm_id, seq) order, and once per communicator after its last group
// (on_comm_end), so callers can settle what needs a communicator's whole history.
struct GroupVisitor {
  std::function<void(const CollectiveGroup&)> on_group;
  std::function<void(const std::string& comm_id)> on_comm_end;
};
Status for_each_collective_group(const profiler::TraceReader& reader,
                                 const AnalysisWindow& window, const GroupVisitor& visitor);
// One visitor that calls each of `visitors` in turn, so several analyses share one pass.
GroupVisitor visit_all(std::vector<GroupVisitor> visitors);

// True when the run is over (any status but `running`), so a rank that never recorded an op
// will not record it later.
StatusOr<bool> run_has_ended(const profiler::TraceReader& reader);

}  // namespace partrain::analyzers
