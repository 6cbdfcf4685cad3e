// GPU activity collection for one traced process: what its NCCL calls and its lifecycle need from
// it, whatever collects it (CUPTI in CUDA builds; nothing otherwise). Used by the injection library
// in a foreign program (profiler/inject/) and in-process by a `partrain launch --device cuda` rank
// (runner/worker/rank_tracing.cpp). The CUPTI session is profiler/cupti/cupti_session.cpp.
#pragma once

#include <cstdint>
#include <memory>

#include "profiler/gpu_activity_translator.h"
#include "profiler/nccl_tracker.h"

namespace partrain::profiler {

class GpuTracing {
 public:
  virtual ~GpuTracing() = default;
  // Around each NCCL call and ncclGroupEnd: the kernels launched inside carry this id.
  virtual void push_correlation(uint64_t id) = 0;
  virtual void pop_correlation() = 0;
  // An NCCL call, recorded once its kernels are known (or at stop()).
  virtual void add_nccl_call(const NcclCallRecord& call) = 0;
  // Asks for the records of work already completed (at a step's end); returns at once, the
  // flush itself runs on the collection's own thread, never on the program's.
  virtual void flush() = 0;
  // Everything CUPTI still holds flushed and recorded; no record is collected after it. Then
  // CUPTI is released (its activity kinds disabled, its callbacks unsubscribed), so CUDA work
  // after it reaches nothing of this object: for a process whose CUDA is still alive.
  virtual void stop() = 0;
  // The same records, at the process's exit (atexit), where the program's CUDA may already be
  // torn down: CUPTI is left as it is, since its calls that reach the driver
  // (cuptiActivityDisable, cuptiUnsubscribe) crash once CUDA is gone. The object must then never
  // be destroyed: CUPTI may still call into it until the process ends.
  virtual void stop_at_exit() = 0;
};

// Starts GPU activity collection into `sink` at the level PARTRAIN_GPU_TRACE asks for
// (profiler/gpu_trace_level.h), or returns nullptr: silently at level nccl (no CUPTI), else after
// saying why once on stderr (no CUPTI library, another profiler holds CUPTI, no GPU, a CPU-only
// build: host-side tracing goes on either way). Call once CUDA is initialised in the process.
std::unique_ptr<GpuTracing> start_gpu_tracing(GpuTraceSink& sink);

}  // namespace partrain::profiler
