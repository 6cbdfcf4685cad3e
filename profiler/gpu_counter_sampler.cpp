#include "profiler/gpu_counter_sampler.h"

#include <fmt/format.h>

namespace partrain::profiler {

std::vector<CounterSample> counter_samples(const GpuCounterReading& reading, int device_index,
                                           int32_t rank, int64_t ts_ns) {
  std::vector<CounterSample> samples;
  auto add = [&](std::string_view quantity, std::optional<double> value) {
    if (value) samples.push_back({rank, fmt::format("gpu{}.{}", device_index, quantity), ts_ns, *value});
  };
  add("utilization_pct", reading.utilization_pct);
  add("sm_clock_mhz", reading.sm_clock_mhz);
  add("power_w", reading.power_w);
  if (reading.throttle_reasons) {
    add("throttle_reasons", static_cast<double>(*reading.throttle_reasons));
  }
  return samples;
}

GpuCounterSampler::GpuCounterSampler(std::unique_ptr<GpuCounterSource> source, int32_t rank,
                                     std::chrono::milliseconds interval,
                                     std::function<int64_t()> now,
                                     std::function<void(const CounterSample&)> emit)
    : source_(std::move(source)),
      rank_(rank),
      interval_(interval),
      now_(std::move(now)),
      emit_(std::move(emit)) {
  thread_ = std::thread([this] { run(); });
}

GpuCounterSampler::~GpuCounterSampler() { stop(); }

void GpuCounterSampler::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t GpuCounterSampler::readings() const {
  std::lock_guard lock(mutex_);
  return readings_;
}

void GpuCounterSampler::sample() {
  const GpuCounterReading reading = source_->read();
  for (const CounterSample& s : counter_samples(reading, source_->device_index(), rank_, now_())) {
    emit_(s);
  }
  std::lock_guard lock(mutex_);
  ++readings_;
}

void GpuCounterSampler::run() {
  for (;;) {
    sample();
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, interval_, [this] { return stopping_; })) break;
  }
  sample();  // the state at the end, however short the run
}

}  // namespace partrain::profiler
