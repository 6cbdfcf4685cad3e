#include "runner/workload/ddp_overlap.h"

namespace partrain::runner {

DdpOverlap::DdpOverlap(const profiler::FlightRecorder* recorder, const comm::Comm& dp)
    : recorder_(recorder),
      dp_(dp),
      recorded_before_(recorder != nullptr ? recorder->total_recorded() : 0) {}

void DdpOverlap::count_step(int64_t step_start_ns, int64_t backward_end_ns,
                            RunSummary& summary) {
  if (recorder_ == nullptr) return;
  if (dp_.size() > 1) {
    for (const profiler::CollectiveEvent& event : recorder_->since(recorded_before_)) {
      if (event.comm_id != dp_.id() || event.op != "all_reduce") continue;
      ++summary.ddp_bucket_all_reduces;
      if (event.start_ns >= step_start_ns && event.start_ns < backward_end_ns) {
        ++summary.ddp_buckets_started_in_backward;
      }
    }
  }
  recorded_before_ = recorder_->total_recorded();
}

}  // namespace partrain::runner
