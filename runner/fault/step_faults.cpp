#include "runner/fault/step_faults.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "profiler/trace_scope.h"
#include "runner/fault/process_fault.h"

namespace partrain::runner::fault {

void inject_step_start_faults(const std::vector<FaultSpec>& faults, int rank, int64_t step,
                              TrackedAllocator& allocator, profiler::RankTracer* tracer) {
  // slow: this rank sleeps before its compute, a straggler the analyzers should find.
  if (const int64_t delay_ms = slow_delay_ms(faults, rank, step); delay_ms > 0) {
    profiler::TraceScope delay(tracer, "injected_delay", profiler::SliceCategory::kSync);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  }
  if (const FaultSpec* f = fault_at(faults, FaultKind::kCrash, rank, step)) {
    crash_rank(*f, rank, step, tracer);
  }
  if (const FaultSpec* f = fault_at(faults, FaultKind::kExit, rank, step)) {
    exit_rank(*f, rank, step, tracer);
  }
  if (const FaultSpec* f = fault_at(faults, FaultKind::kHang, rank, step)) {
    hang_rank(*f, rank, step, tracer);
  }
  if (const FaultSpec* f = fault_at(faults, FaultKind::kStop, rank, step)) {
    stop_rank(*f, rank, step, tracer);
  }
  if (const FaultSpec* f = fault_at(faults, FaultKind::kOom, rank, step)) {
    allocator.set_limit_bytes(allocator.stats().total_current,
                              fmt::format("--inject {} at step {}", fault_spec_text(*f), step));
  }
}

}  // namespace partrain::runner::fault
