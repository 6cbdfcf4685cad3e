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

}  // namespace partrain::profiler
