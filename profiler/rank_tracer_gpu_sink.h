// A rank's tracer as the GPU activity translator's sink: kernels, copies and NCCL calls with their
// GPU times go into the rank's trace on its timeline, tagged with its current step. Shared by the
// injection library and a partrain rank tracing its own GPU.
#pragma once

#include <cstdint>

#include "profiler/gpu_activity_translator.h"
#include "profiler/rank_tracer.h"

namespace partrain::profiler {

class RankTracerGpuSink final : public GpuTraceSink {
 public:
  explicit RankTracerGpuSink(RankTracer& tracer) : tracer_(tracer) {}
  int32_t rank() const override { return tracer_.rank(); }
  int64_t timeline_ns(int64_t local_ns) const override { return tracer_.timeline_ns(local_ns); }
  int64_t step_at(int64_t local_ns) const override { return tracer_.step_at(local_ns); }
  void emit(const TraceEvent& event) override { tracer_.emit(event); }
  void collective(const CollectiveEvent& event, int64_t gpu_start_ns,
                  int64_t gpu_end_ns) override {
    tracer_.collective(event, gpu_start_ns, gpu_end_ns);
  }

 private:
  RankTracer& tracer_;
};

}  // namespace partrain::profiler
