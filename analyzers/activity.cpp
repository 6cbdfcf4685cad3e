#include "analyzers/activity.h"

namespace partrain::analyzers {

using profiler::SliceCategory;

bool is_nccl_kernel(std::string_view name) {
  return name.starts_with("nccl") && name.find("Kernel", 4) != std::string_view::npos;
}

Activity activity_of(SliceCategory category) {
  switch (category) {
    case SliceCategory::kCompute:
    case SliceCategory::kKernel: return Activity::kCompute;
    case SliceCategory::kCollective:
    case SliceCategory::kP2p: return Activity::kComm;
    case SliceCategory::kMemcpy:
    case SliceCategory::kMemset: return Activity::kMemcpy;
    case SliceCategory::kSync: return Activity::kSync;
    case SliceCategory::kPhase: return Activity::kPhase;
    case SliceCategory::kStep: return Activity::kStep;
  }
  return Activity::kSync;
}

Activity activity_of(SliceCategory category, std::string_view name) {
  if (category == SliceCategory::kKernel && is_nccl_kernel(name)) return Activity::kComm;
  return activity_of(category);
}

profiler::SliceCategorySet breakdown_categories() {
  return {SliceCategory::kCompute, SliceCategory::kKernel,  SliceCategory::kCollective,
          SliceCategory::kP2p,     SliceCategory::kMemcpy,  SliceCategory::kMemset,
          SliceCategory::kPhase};
}

StatusOr<Activity> ActivityByName::of(SliceCategory category, int64_t name_id) {
  if (category != SliceCategory::kKernel) return activity_of(category);
  auto found = kernels_.find(name_id);
  if (found != kernels_.end()) return found->second;
  ASSIGN_OR_RETURN(const std::string_view name, reader_.string(name_id));
  return kernels_.emplace(name_id, activity_of(category, name)).first->second;
}

}  // namespace partrain::analyzers
