#include "profiler/collective_event.h"

namespace partrain::profiler {

std::string_view collective_state_name(CollectiveState state) {
  switch (state) {
    case CollectiveState::kEnqueued: return "enqueued";
    case CollectiveState::kStarted: return "started";
    case CollectiveState::kCompleted: return "completed";
    case CollectiveState::kFailed: return "failed";
  }
  return "unknown";
}

uint64_t nccl_tests_size_bytes(std::string_view op, uint64_t buffer_bytes, int group_size) {
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all" || op == "gather" ||
      op == "scatter") {
    return buffer_bytes * static_cast<uint64_t>(group_size > 0 ? group_size : 1);
  }
  if (op == "barrier") return 0;
  return buffer_bytes;
}

bool members_move_one_size(std::string_view op) { return op != "all_to_all"; }

}  // namespace partrain::profiler
