#include "profiler/nccl_plugin_join.h"

#include <algorithm>

#include "profiler/p2p_seq.h"

namespace partrain::profiler {
namespace {

// One report for a row that stands for several calls (a PyTorch op that made them): the span of
// all, with the first one's algorithm and protocol.
NcclPluginOp merged(const std::vector<NcclPluginOp>& reports) {
  NcclPluginOp all = reports.front();
  for (size_t i = 1; i < reports.size(); ++i) {
    const NcclPluginOp& next = reports[i];
    if (next.gpu_start_ns >= 0) {
      all.gpu_start_ns =
          all.gpu_start_ns < 0 ? next.gpu_start_ns : std::min(all.gpu_start_ns, next.gpu_start_ns);
      all.gpu_end_ns = std::max(all.gpu_end_ns, next.gpu_end_ns);
    }
    all.channels = std::max(all.channels, next.channels);
    all.channels_timed += next.channels_timed;
  }
  return all;
}

}  // namespace

void NcclPluginJoin::context_created(uint64_t comm_hash, int nranks, int rank) {
  std::lock_guard lock(mutex_);
  any_context_.store(true, std::memory_order_release);
  if (!comm_by_hash_.contains(comm_hash)) unbound_.push_back({comm_hash, {nranks, rank}});
}

void NcclPluginJoin::bind(uint64_t comm_hash, const std::string& comm_id) {
  std::lock_guard lock(mutex_);
  bind_locked(comm_hash, comm_id);
}

void NcclPluginJoin::bind_locked(uint64_t comm_hash, const std::string& comm_id) {
  any_context_.store(true, std::memory_order_release);
  comm_by_hash_[comm_hash] = comm_id;
  hash_by_comm_[comm_id] = comm_hash;
  std::erase_if(unbound_, [&](const auto& context) { return context.first == comm_hash; });
}

void NcclPluginJoin::call_recorded(const NcclCallRecord& call) {
  const CollectiveEvent& event = call.event;
  // One rank: NCCL copies in place and runs no kernel, so the plugin reports nothing.
  if (!any_context_.load(std::memory_order_acquire) || event.group_size <= 1 ||
      call.correlation == 0) {
    return;
  }
  std::lock_guard lock(mutex_);
  if (!hash_by_comm_.contains(event.comm_id)) {
    // Only an unambiguous one: two unbound contexts of this size and rank could be either.
    const auto same_shape = [&](const auto& candidate) {
      return candidate.second == std::pair(event.group_size, event.rank);
    };
    auto context = std::find_if(unbound_.begin(), unbound_.end(), same_shape);
    if (context == unbound_.end() ||
        std::count_if(unbound_.begin(), unbound_.end(), same_shape) > 1) {
      return;  // no plugin context for it (known): nothing will come
    }
    bind_locked(context->first, event.comm_id);
  }
  const Key key{event.comm_id, event.op};
  const Expected expected{call.correlation, event.count, is_p2p(event.op) ? event.peer : -1};
  Correlation& correlation = correlations_[call.correlation];
  std::deque<NcclPluginOp>& early = early_[key];
  auto report = std::find_if(early.begin(), early.end(), [&](const NcclPluginOp& op) {
    return op.count == expected.count && op.peer == expected.peer;
  });
  if (report != early.end()) {
    correlation.reports.push_back(std::move(*report));
    early.erase(report);
    --early_count_;
    return;
  }
  ++correlation.unreported;
  std::deque<Expected>& waiting = expected_[key];
  waiting.push_back(expected);
  // Calls whose reports never come (their rows left at the bound): the oldest are forgotten.
  if (waiting.size() > kMaxWaiting) waiting.pop_front();
}

void NcclPluginJoin::op_reported(const NcclPluginOp& op) {
  Joined out;
  {
    std::lock_guard lock(mutex_);
    auto comm = comm_by_hash_.find(op.comm_hash);
    if (comm == comm_by_hash_.end()) {
      ++stats_.unmatched;
      return;
    }
    const Key key{comm->second, op.op};
    std::deque<Expected>& waiting = expected_[key];
    // The oldest call of the same count: NCCL may run a group's tasks in another order than
    // they were called, but calls of equal size are taken in order on every rank alike.
    auto call = std::find_if(waiting.begin(), waiting.end(), [&](const Expected& expected) {
      return expected.count == op.count && expected.peer == op.peer;
    });
    if (call == waiting.end()) {
      early_[key].push_back(op);
      if (++early_count_ > kMaxWaiting) {  // reports of calls that never came: the oldest go
        for (auto& [unused, reports] : early_) {
          if (reports.empty()) continue;
          reports.pop_front();
          --early_count_;
          ++stats_.unmatched;
          break;
        }
      }
      return;
    }
    const uint64_t id = call->correlation;
    waiting.erase(call);
    auto correlation = correlations_.find(id);
    if (correlation == correlations_.end()) {
      ++stats_.unmatched;  // evicted meanwhile: its rows already left
      return;
    }
    --correlation->second.unreported;
    correlation->second.reports.push_back(op);
    complete(id, false, out);
  }
  send(out);
}

void NcclPluginJoin::deliver(const NcclCallRecord& row) {
  if (!any_context_.load(std::memory_order_acquire)) {  // nothing can be waiting
    deliver_(row, nullptr);
    return;
  }
  Joined out;
  {
    std::lock_guard lock(mutex_);
    auto correlation = correlations_.find(row.correlation);
    if (row.correlation == 0 || correlation == correlations_.end()) {
      out.push_back({row, std::nullopt});  // no report is coming for it
    } else {
      correlation->second.rows.push_back(row);
      complete(row.correlation, false, out);
      while (correlations_.size() > kMaxWaiting) evict_oldest(out);
    }
  }
  send(out);
}

void NcclPluginJoin::complete(uint64_t id, bool all, Joined& out) {
  auto found = correlations_.find(id);
  Correlation& correlation = found->second;
  std::vector<NcclCallRecord> rest;
  for (NcclCallRecord& row : correlation.rows) {
    auto report = std::find_if(correlation.reports.begin(), correlation.reports.end(),
                               [&](const NcclPluginOp& op) {
                                 return op.op == row.event.op && op.count == row.event.count;
                               });
    if (report == correlation.reports.end()) {
      rest.push_back(std::move(row));
      continue;
    }
    out.push_back({std::move(row), std::move(*report)});
    correlation.reports.erase(report);
  }
  correlation.rows = std::move(rest);
  // A row unlike its calls (a PyTorch op standing for them) takes all their reports once every
  // one has come.
  if (!correlation.rows.empty() && (all || correlation.unreported == 0)) {
    std::optional<NcclPluginOp> span;
    if (!correlation.reports.empty()) span = merged(correlation.reports);
    correlation.reports.clear();
    for (NcclCallRecord& row : correlation.rows) out.push_back({std::move(row), span});
    correlation.rows.clear();
  }
  if (all ||
      (correlation.rows.empty() && correlation.reports.empty() && correlation.unreported == 0)) {
    correlations_.erase(found);
  }
}

void NcclPluginJoin::evict_oldest(Joined& out) {
  auto oldest = correlations_.begin();
  for (NcclCallRecord& row : oldest->second.rows) out.push_back({std::move(row), std::nullopt});
  correlations_.erase(oldest);
}

void NcclPluginJoin::flush() {
  Joined out;
  {
    std::lock_guard lock(mutex_);
    while (!correlations_.empty()) complete(correlations_.begin()->first, true, out);
    expected_.clear();
    stats_.unmatched += early_count_;
    early_.clear();
    early_count_ = 0;
  }
  send(out);
}

void NcclPluginJoin::send(Joined& out) {
  {
    std::lock_guard lock(mutex_);
    for (const auto& [row, report] : out) ++(report ? stats_.joined : stats_.host_only);
  }
  for (const auto& [row, report] : out) deliver_(row, report ? &*report : nullptr);
}

NcclPluginJoinStats NcclPluginJoin::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace partrain::profiler
