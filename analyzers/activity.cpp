#include "analyzers/activity.h"

namespace partrain::analyzers {

using profiler::SliceCategory;

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

profiler::SliceCategorySet breakdown_categories() {
  return {SliceCategory::kCompute, SliceCategory::kKernel,  SliceCategory::kCollective,
          SliceCategory::kP2p,     SliceCategory::kMemcpy,  SliceCategory::kMemset,
          SliceCategory::kPhase};
}

}  // namespace partrain::analyzers
