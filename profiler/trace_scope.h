// TraceScope: a slice from construction to destruction on the caller's tracer, the way
// RECORD_FUNCTION marks a region in PyTorch. The tracer comes from whoever records (the trainer,
// a model chunk, the optimizer were given it when made); nullptr means the rank is not traced,
// and the scope then costs one comparison. The name must outlive the scope (a literal, or a
// string owned by the caller).
#pragma once

#include <string_view>

#include "core/clock.h"
#include "profiler/rank_tracer.h"

namespace partrain::profiler {

class TraceScope {
 public:
  TraceScope(RankTracer* tracer, std::string_view name, SliceCategory category, int layer = -1,
             int micro_batch = -1) noexcept
      : tracer_(tracer),
        name_(name),
        category_(category),
        layer_(layer),
        micro_batch_(micro_batch),
        start_ns_(tracer_ != nullptr ? monotonic_ns() : 0) {}
  ~TraceScope() {
    if (tracer_ != nullptr) {
      tracer_->slice(name_, category_, start_ns_, monotonic_ns(), layer_, micro_batch_);
    }
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  RankTracer* const tracer_;
  const std::string_view name_;
  const SliceCategory category_;
  const int layer_;
  const int micro_batch_;
  const int64_t start_ns_;
};

}  // namespace partrain::profiler
