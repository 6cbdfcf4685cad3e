// One row per collective when two adapters see it: PyTorch's c10d hooks (group name, c10d's
// numbering, completion) and the NCCL interposition (the communicator's call, its kernels' GPU
// time through the external correlation id). They are joined by thread and time window, never
// by their numbers (c10d and NCCL count barriers and coalesced ops differently): the pre hook
// opens a window on its thread, the NCCL calls that thread makes before the post hook closes it
// carry the window's id (NcclCallRecord::torch_op), and when PyTorch's record of the op arrives
// (at completion, from any thread) it leaves as the row, with the first such call's correlation
// so the GPU span is found for it. Pure bookkeeping, thread-safe; fed by
// profiler/inject/torch_abi.cpp and by tests.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "profiler/collective_event.h"
#include "profiler/nccl_tracker.h"

namespace partrain::profiler {

struct TorchNcclJoinStats {
  uint64_t joined = 0;        // PyTorch ops that absorbed one or more NCCL calls
  uint64_t nccl_alone = 0;    // NCCL calls of a window whose PyTorch record never came in time
};

class TorchNcclJoin {
 public:
  // Where a row goes: NCCL's own calls unchanged, or PyTorch's op with the correlation (and
  // stream) of its NCCL calls, 0 when it made none.
  using Deliver = std::function<void(const NcclCallRecord&)>;
  // Bounds on what waits for its other half; beyond them the oldest goes on alone.
  static constexpr size_t kMaxWaitingOps = 1 << 14;
  static constexpr size_t kRememberedOps = 1 << 12;

  explicit TorchNcclJoin(Deliver deliver) : deliver_(std::move(deliver)) {}

  // An NCCL call, recorded (returned, or its group ended). Outside any window it is delivered
  // as it is; inside one it waits for PyTorch's record of that op.
  void nccl_call(const NcclCallRecord& call);
  // PyTorch's record of the op whose window was `op` (0: it opened none, as on a gloo group).
  void torch_op(uint64_t op, const CollectiveEvent& event);
  // The process ends: NCCL calls still waiting go on alone.
  void flush();

  TorchNcclJoinStats stats() const;

 private:
  void remember_done(uint64_t op);

  const Deliver deliver_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::vector<NcclCallRecord>> waiting_;  // by window
  std::deque<uint64_t> waiting_order_;
  // Windows whose PyTorch record already left: a late call of theirs goes on alone.
  std::unordered_set<uint64_t> done_;
  std::deque<uint64_t> done_order_;
  TorchNcclJoinStats stats_;
};

}  // namespace partrain::profiler
