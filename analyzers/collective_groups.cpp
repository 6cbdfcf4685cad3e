// for_each_collective_group: the (comm_id, seq) stream behind the collective analyses.
#include "analyzers/collective_groups.h"

#include <algorithm>
#include <charconv>
#include <optional>

namespace partrain::analyzers {
namespace {

bool row_in_window(const AnalysisWindow& window, int rank, int64_t ts_ns) {
  auto span = window.spans.find(rank);
  return span != window.spans.end() && ts_ns >= span->second.start_ns &&
         ts_ns <= span->second.end_ns;
}

Status stream_comm(const profiler::TraceReader& reader, const AnalysisWindow& window,
                   const profiler::Communicator& comm, const GroupVisitor& visitor) {
  ASSIGN_OR_RETURN(profiler::CommunicatorOpCursor ops, profiler::communicator_ops(reader, comm));
  CollectiveGroup group;
  group.comm_id = comm.comm_id;
  auto flush = [&] {
    if (!group.rows.empty() && visitor.on_group) visitor.on_group(group);
    group.rows.clear();
  };
  profiler::CollectiveOp op;
  while (ops.next(op)) {
    if (!group.rows.empty() && op.seq != group.seq) flush();
    group.seq = op.seq;
    group.rows.push_back(collective_row(op, window));
  }
  RETURN_IF_ERROR(ops.status());
  flush();
  if (visitor.on_comm_end) visitor.on_comm_end(comm.comm_id);
  return Status::ok();
}

}  // namespace

CollectiveRow collective_row(const profiler::CollectiveOp& op, const AnalysisWindow& window) {
  CollectiveRow row = collective_row(op);
  row.in_window = row_in_window(window, row.rank, row.ts_ns);
  return row;
}

CollectiveRow collective_row(const profiler::CollectiveOp& op) {
  CollectiveRow row;
  row.rank = op.rank;
  row.op = op.op;
  row.label = op.label;
  row.bytes = op.bytes;
  row.sized = op.bytes > 0 || (op.op != "barrier" && !op.dtype.empty() && op.dtype != "other");
  row.peer = op.peer;
  row.ts_ns = op.ts_ns;
  row.end_ns = op.ts_ns + op.dur_ns;
  row.time_ns = op.gpu_start_ns && op.gpu_end_ns ? *op.gpu_end_ns - *op.gpu_start_ns : op.dur_ns;
  row.group_size = op.group_size;
  row.group_ranks = op.group_ranks;
  row.completed = op.state == profiler::CollectiveState::kCompleted;
  row.step = op.step;
  return row;
}

namespace {

template <typename Rows, typename Row>
GroupArrival arrival_over(const Rows& rows, Row row) {
  GroupArrival arrival{row(rows.front()).ts_ns, row(rows.front()).ts_ns, row(rows.front()).rank};
  for (const auto& each : rows) {
    const CollectiveRow& r = row(each);
    arrival.first_start_ns = std::min(arrival.first_start_ns, r.ts_ns);
    if (r.ts_ns > arrival.last_start_ns) {
      arrival.last_start_ns = r.ts_ns;
      arrival.last_rank = r.rank;
    }
  }
  return arrival;
}

}  // namespace

GroupArrival arrival_of(std::span<const CollectiveRow* const> rows) {
  return arrival_over(rows, [](const CollectiveRow* r) -> const CollectiveRow& { return *r; });
}

GroupArrival arrival_of(std::span<const CollectiveRow> rows) {
  return arrival_over(rows, [](const CollectiveRow& r) -> const CollectiveRow& { return r; });
}

bool CollectiveGroup::in_window() const {
  for (const CollectiveRow& row : rows) {
    if (row.in_window) return true;
  }
  return false;
}

std::vector<int> parse_group_ranks(std::string_view text) {
  std::vector<int> ranks;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    int value = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (ec == std::errc() && end == item.data() + item.size()) ranks.push_back(value);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return ranks;
}

Status for_each_collective_group(const profiler::TraceReader& reader,
                                 const AnalysisWindow& window, const GroupVisitor& visitor) {
  // A handful of communicators; listed first so one statement is open at a time.
  ASSIGN_OR_RETURN(const std::vector<profiler::Communicator> comms,
                   profiler::communicators(reader));
  for (const profiler::Communicator& comm : comms) {
    RETURN_IF_ERROR(stream_comm(reader, window, comm, visitor));
  }
  return Status::ok();
}

GroupVisitor visit_all(std::vector<GroupVisitor> visitors) {
  GroupVisitor all;
  all.on_group = [visitors](const CollectiveGroup& group) {
    for (const GroupVisitor& v : visitors) {
      if (v.on_group) v.on_group(group);
    }
  };
  all.on_comm_end = [visitors](const std::string& comm_id) {
    for (const GroupVisitor& v : visitors) {
      if (v.on_comm_end) v.on_comm_end(comm_id);
    }
  };
  return all;
}

StatusOr<bool> run_has_ended(const profiler::TraceReader& reader) {
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  // No run row: nothing is still writing.
  return !run || run->status != profiler::RunStatus::kRunning;
}

}  // namespace partrain::analyzers
