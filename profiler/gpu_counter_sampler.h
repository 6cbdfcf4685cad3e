// GPU counters sampled on a timer into the trace (the `counters` view): utilisation, SM clock,
// power and throttle reasons of the rank's GPU, as nvidia-smi and Nsight Systems' GPU metrics
// show them. The readings come from a GpuCounterSource (NVML in libpartrain_inject.so: 
// inject/nvml/nvml_counter_source.h; a fake in tests); the sampler owns the thread and the names.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "profiler/trace_event.h"

namespace partrain::profiler {

// How often a traced process samples its GPU's counters: a duration ("100ms", the default when
// unset; "0" turns sampling off). Set by `partrain trace --nvml-interval`.
inline constexpr std::string_view kNvmlIntervalEnv = "PARTRAIN_NVML_INTERVAL";
inline constexpr std::chrono::milliseconds kDefaultNvmlInterval{100};

// One reading; a quantity the device does not report is nullopt.
struct GpuCounterReading {
  std::optional<double> utilization_pct;   // share of the last sample period a kernel ran
  std::optional<double> sm_clock_mhz;
  std::optional<double> power_w;
  std::optional<uint64_t> throttle_reasons;  // NVML's clock event reason bits (0: none)
};

class GpuCounterSource {
 public:
  virtual ~GpuCounterSource() = default;
  virtual int device_index() const = 0;  // the device read, for the counters' names
  virtual GpuCounterReading read() = 0;
};

// The counter names of device N: "gpuN.utilization_pct", "gpuN.sm_clock_mhz", "gpuN.power_w",
// "gpuN.throttle_reasons".
std::vector<CounterSample> counter_samples(const GpuCounterReading& reading, int device_index,
                                           int32_t rank, int64_t ts_ns);

class GpuCounterSampler {
 public:
  // `emit` gets each sample (times from `now`, the rank's timeline); called on the sampler's
  // thread. Samples at once, then every `interval`, and once more when stopped.
  GpuCounterSampler(std::unique_ptr<GpuCounterSource> source, int32_t rank,
                    std::chrono::milliseconds interval, std::function<int64_t()> now,
                    std::function<void(const CounterSample&)> emit);
  ~GpuCounterSampler();  // stop()
  GpuCounterSampler(const GpuCounterSampler&) = delete;
  GpuCounterSampler& operator=(const GpuCounterSampler&) = delete;

  void stop();  // the last sample, then the thread ends; idempotent
  uint64_t readings() const;

 private:
  void run();
  void sample();

  std::unique_ptr<GpuCounterSource> source_;
  const int32_t rank_;
  const std::chrono::milliseconds interval_;
  std::function<int64_t()> now_;
  std::function<void(const CounterSample&)> emit_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  uint64_t readings_ = 0;
  std::thread thread_;
};

}  // namespace partrain::profiler
