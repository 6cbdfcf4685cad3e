#include "profiler/rank_gpu_counters.h"

#include <optional>
#include <string>
#include <system_error>

#include "core/clock.h"
#include "core/duration.h"
#include "core/env.h"
#include "core/log.h"
#include "profiler/host_refusal.h"
#include "profiler/nvml/nvml_counter_source.h"

namespace partrain::profiler {

StatusOr<std::chrono::milliseconds> parse_nvml_interval(std::string_view text) {
  StatusOr<Nanoseconds> parsed = parse_duration(text);
  if (!parsed.is_ok() || parsed->count() < 0) {
    return invalid_argument("--nvml-interval {}: not a duration; give one such as 100ms or 1s "
                            "(0 turns GPU counters off)", text);
  }
  const auto interval = std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
  // Below a millisecond is as often as the sampler goes, not off.
  if (interval.count() == 0 && parsed->count() > 0) return std::chrono::milliseconds(1);
  return interval;
}

std::unique_ptr<GpuCounterSampler> start_rank_gpu_counters(RankTracer& tracer, int nvml_device) {
  std::chrono::milliseconds interval = kDefaultNvmlInterval;
  if (std::optional<std::string> text = env::get(kNvmlIntervalEnv)) {
    StatusOr<std::chrono::milliseconds> parsed = parse_nvml_interval(*text);
    if (parsed.is_ok()) {
      if (parsed->count() == 0) return nullptr;
      interval = *parsed;
    } else {
      log::warn("{}={}: not a duration (100ms, 1s); GPU counters are sampled every {} ms",
                kNvmlIntervalEnv, *text, kDefaultNvmlInterval.count());
    }
  }
  StatusOr<std::unique_ptr<GpuCounterSource>> source = open_nvml_counter_source(nvml_device);
  if (!source.is_ok()) {
    if (source.status().code() != StatusCode::kUnavailable) {
      log::warn("rank {}: {}; no GPU counters", tracer.rank(), source.status().message());
    }
    return nullptr;
  }
  RankTracer* sink = &tracer;
  try {
    return std::make_unique<GpuCounterSampler>(
        std::move(*source), tracer.rank(), interval,
        [sink] { return sink->timeline_ns(monotonic_ns()); },
        [sink](const CounterSample& sample) { sink->emit(sample); });
  } catch (const std::system_error& e) {
    report_host_refusal(tracer, "gpu_counters_unavailable",
                        unavailable("the host refused a new thread ({})", e.what()),
                        "no GPU counters (NVML) are sampled");
    return nullptr;
  }
}

}  // namespace partrain::profiler
