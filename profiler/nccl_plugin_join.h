// One row per collective when NCCL's profiler plugin reports it too: the interposed call
// (NcclTracker: the communicator's id, partrain's numbering, host times) joined to the plugin's
// report of the same operation (NcclPluginOp: NCCL's algorithm, protocol, channels and the
// kernel channels' GPU span). Two stages, because rows leave through the PyTorch join
// (profiler/torch_nccl_join.h) in their own time: each call is registered as NcclTracker
// records it, and matched there to the plugin's report by communicator (the plugin context's
// hash bound to the interposed communicator), op, count and order (NCCL numbers per function
// and reorders a group's tasks; equal counts are taken in order); a row leaving the PyTorch join
// then waits, by the call's correlation id, for its report. Calls on a communicator with no
// plugin context (one rank: NCCL runs no kernel; an NCCL without plugin v4+) wait for nothing.
// Pure bookkeeping, thread-safe, bounded.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "profiler/nccl_plugin_events.h"
#include "profiler/nccl_tracker.h"

namespace partrain::profiler {

struct NcclPluginJoinStats {
  uint64_t joined = 0;     // rows that left with the plugin's report
  uint64_t host_only = 0;  // rows that waited for a report in vain (bounds, or the end)
  uint64_t unmatched = 0;  // plugin reports no call was found for
};

class NcclPluginJoin {
 public:
  // A row for the trace, with the plugin's report of it (nullptr: host times only).
  using Deliver = std::function<void(const NcclCallRecord&, const NcclPluginOp*)>;
  static constexpr size_t kMaxWaiting = 1 << 14;

  explicit NcclPluginJoin(Deliver deliver) : deliver_(std::move(deliver)) {}

  // The plugin made a context for a communicator NCCL hashes as `comm_hash`, with these
  // members; bind() says which interposed communicator it is when that is known (the context
  // was made inside that communicator's interposed init). An unbound context is bound to the
  // first interposed communicator of the same size and rank that has none, when it is the only
  // unbound one of that size and rank (else that communicator's rows keep host times).
  void context_created(uint64_t comm_hash, int nranks, int rank);
  void bind(uint64_t comm_hash, const std::string& comm_id);

  // Stage 1: a call as NcclTracker recorded it.
  void call_recorded(const NcclCallRecord& call);
  // A report the plugin assembled (any thread).
  void op_reported(const NcclPluginOp& op);
  // Stage 2: a row leaving the PyTorch join.
  void deliver(const NcclCallRecord& row);
  // The process ends: rows still waiting leave with what was reported.
  void flush();

  NcclPluginJoinStats stats() const;

 private:
  struct Expected {  // a registered call, until its report comes
    uint64_t correlation = 0;
    uint64_t count = 0;
    int peer = -1;
  };
  struct Correlation {   // one correlation id's calls (a group's share one)
    int unreported = 0;  // calls registered whose report has not come
    std::vector<NcclPluginOp> reports;
    std::vector<NcclCallRecord> rows;
  };
  using Key = std::pair<std::string, std::string_view>;  // communicator id, op
  using Joined = std::vector<std::pair<NcclCallRecord, std::optional<NcclPluginOp>>>;

  void bind_locked(uint64_t comm_hash, const std::string& comm_id);
  // Rows of `correlation` that can leave now, moved to `out`; `all` when nothing more will come.
  void complete(uint64_t correlation, bool all, Joined& out);
  void evict_oldest(Joined& out);
  void send(Joined& out);

  const Deliver deliver_;
  // No context yet (no plugin, the default level): calls pass through without the lock.
  std::atomic<bool> any_context_{false};
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::string> comm_by_hash_;
  std::unordered_map<std::string, uint64_t> hash_by_comm_;
  std::vector<std::pair<uint64_t, std::pair<int, int>>> unbound_;  // hash, (nranks, rank)
  std::map<Key, std::deque<Expected>> expected_;
  std::map<Key, std::deque<NcclPluginOp>> early_;  // reports before their call was registered
  size_t early_count_ = 0;
  std::map<uint64_t, Correlation> correlations_;  // ids grow: the first is the oldest
  NcclPluginJoinStats stats_;
};

}  // namespace partrain::profiler
