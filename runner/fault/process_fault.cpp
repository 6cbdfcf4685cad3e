#include "runner/fault/process_fault.h"

#include <signal.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/log.h"

namespace partrain::runner::fault {
namespace {

// What was recorded up to the fault reaches the trace; bounded, the fault must still happen.
void flush_trace(profiler::RankTracer* tracer) {
  if (tracer != nullptr) (void)tracer->flush(std::chrono::seconds(2));
}

}  // namespace

void crash_rank(const FaultSpec& spec, int rank, int64_t step, profiler::RankTracer* tracer) {
  log::error("rank {}: --inject {}: aborting at step {}", rank, fault_spec_text(spec), step);
  flush_trace(tracer);
  // An injected crash is expected: a core file of it would only fill the disk.
  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  std::abort();
}

void exit_rank(const FaultSpec& spec, int rank, int64_t step, profiler::RankTracer* tracer) {
  const int code = exit_fault_code(spec);
  log::error("rank {}: --inject {}: exiting with code {} at step {}", rank, fault_spec_text(spec),
             code, step);
  flush_trace(tracer);
  std::_Exit(code);
}

void hang_rank(const FaultSpec& spec, int rank, int64_t step, profiler::RankTracer* tracer) {
  log::warn(
      "rank {}: --inject {}: hanging at step {} until stopped; the other ranks' "
      "collective watchdog (--collective-timeout) will fire",
      rank, fault_spec_text(spec), step);
  flush_trace(tracer);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

void stop_rank(const FaultSpec& spec, int rank, int64_t step, profiler::RankTracer* tracer) {
  log::warn(
      "rank {}: --inject {}: stopping this process (SIGSTOP) at step {}; the other ranks' "
      "collective watchdog (--collective-timeout) will fire",
      rank, fault_spec_text(spec), step);
  flush_trace(tracer);
  ::raise(SIGSTOP);
  log::warn("rank {}: --inject {}: continued (SIGCONT)", rank, fault_spec_text(spec));
}

}  // namespace partrain::runner::fault
