#include "profiler/torch_nccl_join.h"

#include <utility>

namespace partrain::profiler {

void TorchNcclJoin::nccl_call(const NcclCallRecord& call) {
  std::vector<NcclCallRecord> evicted;
  bool alone = call.torch_op == 0;
  {
    std::lock_guard lock(mutex_);
    if (!alone && done_.contains(call.torch_op)) {
      alone = true;  // its op's row has left (a group ended after the op completed)
      ++stats_.nccl_alone;
    }
    if (!alone) {
      auto [entry, inserted] = waiting_.try_emplace(call.torch_op);
      entry->second.push_back(call);
      if (inserted) waiting_order_.push_back(call.torch_op);
      while (waiting_order_.size() > kMaxWaitingOps) {
        auto oldest = waiting_.find(waiting_order_.front());
        waiting_order_.pop_front();
        if (oldest == waiting_.end()) continue;
        for (NcclCallRecord& record : oldest->second) evicted.push_back(std::move(record));
        stats_.nccl_alone += oldest->second.size();
        remember_done(oldest->first);
        waiting_.erase(oldest);
      }
    }
  }
  for (const NcclCallRecord& record : evicted) deliver_(record);
  if (alone) deliver_(call);
}

void TorchNcclJoin::torch_op(uint64_t op, const CollectiveEvent& event) {
  NcclCallRecord row;
  row.event = event;
  if (op != 0) {
    std::lock_guard lock(mutex_);
    auto found = waiting_.find(op);
    if (found != waiting_.end()) {
      // NCCL's calls of one op share the window's correlation (or their group's): the first
      // one's finds the op's kernels.
      row.correlation = found->second.front().correlation;
      row.stream = found->second.front().stream;
      ++stats_.joined;
      waiting_.erase(found);
      // waiting_order_ keeps the id until it reaches the front: erased entries are skipped there.
    }
    remember_done(op);
  }
  deliver_(row);
}

void TorchNcclJoin::flush() {
  std::vector<NcclCallRecord> left;
  {
    std::lock_guard lock(mutex_);
    for (uint64_t op : waiting_order_) {
      auto found = waiting_.find(op);
      if (found == waiting_.end()) continue;
      for (NcclCallRecord& record : found->second) left.push_back(std::move(record));
      waiting_.erase(found);
    }
    waiting_order_.clear();
    stats_.nccl_alone += left.size();
  }
  for (const NcclCallRecord& record : left) deliver_(record);
}

TorchNcclJoinStats TorchNcclJoin::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void TorchNcclJoin::remember_done(uint64_t op) {
  if (!done_.insert(op).second) return;
  done_order_.push_back(op);
  if (done_order_.size() > kRememberedOps) {
    done_.erase(done_order_.front());
    done_order_.pop_front();
  }
}

}  // namespace partrain::profiler
