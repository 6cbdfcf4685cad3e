// A worker's tracing for its whole life, when its launcher (or `partrain trace`) runs a collector
// (PARTRAIN_COLLECTOR): the rank's tracer, made before the world is joined so every collective is
// recorded and handed to the workload (tracer()), the rank's metadata once joined, the clock kept
// on the run-wide timeline while it trains, on a GPU its kernels, copies and device memory
// through CUPTI (the same collection libpartrain_inject.so runs in a foreign program, here
// in-process), and a final flush. Untraced processes never create one.
#pragma once

#include <memory>
#include <string>

#include "profiler/gpu_counter_sampler.h"
#include "profiler/gpu_tracing.h"
#include "profiler/rank_tracer.h"
#include "profiler/rank_tracer_gpu_sink.h"
#include "runner/worker/clock_resync.h"
#include "runner/worker/world.h"

namespace partrain::runner {

class RankTracing {
 public:
  // nullptr when the environment names no collector (or RANK is not set).
  static std::unique_ptr<RankTracing> from_env();
  ~RankTracing();  // stops the GPU collection and the clock re-sync, flushes the tracer
  RankTracing(const RankTracing&) = delete;
  RankTracing& operator=(const RankTracing&) = delete;

  // Before join_world: routes the world's collectives into the trace.
  void attach(WorldOptions& options);
  // After join_world: records who this rank is (device e.g. "cpu", "cuda:0") and starts the
  // clock re-sync; on a CUDA device, starts collecting GPU activity (flushed at every step's end),
  // or says once why it cannot (no CUPTI, another profiler holds it) and traces the host side,
  // and samples the GPU's counters through NVML where a driver is (rank_gpu_counters.h).
  void joined(const World& world, const std::string& device);
  // At the end of the run: a last GPU counter sample, the GPU activity still in CUPTI's buffers,
  // a last clock measurement and a flush of everything buffered.
  void finish();

  profiler::RankTracer& tracer() { return *tracer_; }

 private:
  explicit RankTracing(std::unique_ptr<profiler::RankTracer> tracer);

  void stop_gpu_tracing();

  std::unique_ptr<profiler::RankTracer> tracer_;
  std::unique_ptr<ClockResync> resync_;
  profiler::RankTracerGpuSink gpu_sink_;
  std::unique_ptr<profiler::GpuTracing> gpu_;  // on a CUDA device where CUPTI could start
  std::unique_ptr<profiler::GpuCounterSampler> gpu_counters_;  // on a CUDA device, with NVML
};

}  // namespace partrain::runner
