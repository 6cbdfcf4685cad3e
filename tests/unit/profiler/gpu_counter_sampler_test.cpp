// GpuCounterSampler over a scripted source: samples at once, on its interval and when stopped,
// names each quantity after its device, leaves out what the device does not report, and emits
// on the rank's timeline. And which NVML device a process samples.
#include "profiler/gpu_counter_sampler.h"

#include <stdlib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "profiler/nvml/nvml_counter_source.h"

namespace partrain::profiler {
namespace {

class ScriptedSource final : public GpuCounterSource {
 public:
  explicit ScriptedSource(GpuCounterReading reading) : reading_(reading) {}
  int device_index() const override { return 5; }
  GpuCounterReading read() override {
    ++reads;
    return reading_;
  }
  std::atomic<int> reads{0};

 private:
  GpuCounterReading reading_;
};

TEST(GpuCounterSamples, AreNamedAfterTheDeviceWithTheirUnits) {
  GpuCounterReading reading{42.0, 1980.0, 412.345, 4};
  const std::vector<CounterSample> samples = counter_samples(reading, 3, 7, 1'000);
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples[0].name, "gpu3.utilization_pct");
  EXPECT_EQ(samples[1].name, "gpu3.sm_clock_mhz");
  EXPECT_EQ(samples[2].name, "gpu3.power_w");
  EXPECT_EQ(samples[3].name, "gpu3.throttle_reasons");
  EXPECT_DOUBLE_EQ(samples[2].value, 412.345);
  EXPECT_DOUBLE_EQ(samples[3].value, 4.0);
  for (const CounterSample& s : samples) {
    EXPECT_EQ(s.rank, 7);
    EXPECT_EQ(s.ts_ns, 1'000);
  }
}

TEST(GpuCounterSamples, LeaveOutWhatTheDeviceDoesNotReport) {
  GpuCounterReading reading;
  reading.sm_clock_mhz = 1410.0;
  const std::vector<CounterSample> samples = counter_samples(reading, 0, 0, 5);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].name, "gpu0.sm_clock_mhz");
}

TEST(GpuCounterSampler, SamplesAtOnceOnItsIntervalAndWhenStopped) {
  auto source = std::make_unique<ScriptedSource>(GpuCounterReading{50.0, std::nullopt, 300.0, 0});
  ScriptedSource* scripted = source.get();
  std::mutex mutex;
  std::vector<CounterSample> emitted;
  std::atomic<int64_t> clock{100};
  const auto began = std::chrono::steady_clock::now();
  GpuCounterSampler sampler(
      std::move(source), 2, std::chrono::milliseconds(10), [&] { return clock += 10; },
      [&](const CounterSample& s) {
        std::lock_guard lock(mutex);
        emitted.push_back(s);
      });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  sampler.stop();
  sampler.stop();  // idempotent
  const auto elapsed = std::chrono::steady_clock::now() - began;
  const uint64_t readings = sampler.readings();
  EXPECT_GE(readings, 3u) << "the first, some on the 10 ms interval, the last";
  // No more often than its interval over the time it ran (the sleep runs long on a loaded
  // machine: 13 readings once, against a bound of 12 that took the sleep to be 100 ms).
  const auto intervals = static_cast<uint64_t>(elapsed / std::chrono::milliseconds(10));
  EXPECT_LE(readings, intervals + 2) << "the first, one an interval, the last";
  EXPECT_EQ(static_cast<uint64_t>(scripted->reads.load()), readings);
  std::lock_guard lock(mutex);
  ASSERT_EQ(emitted.size(), 3 * readings);  // utilisation, power, throttle reasons
  for (size_t i = 0; i < emitted.size(); ++i) {
    EXPECT_EQ(emitted[i].rank, 2);
    EXPECT_EQ(emitted[i].name.rfind("gpu5.", 0), 0u) << emitted[i].name;
    if (i > 0) {
      EXPECT_GE(emitted[i].ts_ns, emitted[i - 1].ts_ns);
    }
  }
}

TEST(GpuCounterSampler, StopsPromptlyWhateverItsInterval) {
  auto source = std::make_unique<ScriptedSource>(GpuCounterReading{1.0, 2.0, 3.0, 0});
  GpuCounterSampler sampler(std::move(source), 0, std::chrono::hours(1), [] { return 0; },
                            [](const CounterSample&) {});
  const auto start = std::chrono::steady_clock::now();
  sampler.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(sampler.readings(), 2u);  // the first and the last
}

// A rank that knows its CUDA device (a partrain rank: cuda:N) samples that device's entry of
// CUDA_VISIBLE_DEVICES, whatever its LOCAL_RANK (ranks sharing a GPU over Gloo all use cuda:0).
TEST(NvmlDeviceForCudaDevice, MapsTheOrdinalThroughCudaVisibleDevices) {
  setenv("LOCAL_RANK", "3", 1);
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(nvml_device_for_cuda_device(0), 0);
  EXPECT_EQ(nvml_device_for_cuda_device(2), 2);
  setenv("CUDA_VISIBLE_DEVICES", "4,6,7", 1);
  EXPECT_EQ(nvml_device_for_cuda_device(0), 4);
  EXPECT_EQ(nvml_device_for_cuda_device(2), 7);
  EXPECT_EQ(nvml_device_for_cuda_device(3), 3) << "past the list: the ordinal";
  setenv("CUDA_VISIBLE_DEVICES", "GPU-1f2e,GPU-3a4b", 1);
  EXPECT_EQ(nvml_device_for_cuda_device(1), 1) << "UUIDs: the ordinal";
  unsetenv("LOCAL_RANK");
  unsetenv("CUDA_VISIBLE_DEVICES");
}

// LOCAL_RANK picks the process's entry of CUDA_VISIBLE_DEVICES, which NVML's numbering ignores.
TEST(NvmlDeviceForProcess, FollowsLocalRankThroughCudaVisibleDevices) {
  unsetenv("LOCAL_RANK");
  unsetenv("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(nvml_device_for_process(), 0);
  setenv("LOCAL_RANK", "2", 1);
  EXPECT_EQ(nvml_device_for_process(), 2);
  setenv("CUDA_VISIBLE_DEVICES", "4,6,7", 1);
  EXPECT_EQ(nvml_device_for_process(), 7);
  setenv("CUDA_VISIBLE_DEVICES", "GPU-1f2e,GPU-3a4b,GPU-5c6d", 1);
  EXPECT_EQ(nvml_device_for_process(), 2) << "UUIDs: LOCAL_RANK";
  setenv("CUDA_VISIBLE_DEVICES", "5", 1);
  EXPECT_EQ(nvml_device_for_process(), 2) << "no entry of its own: LOCAL_RANK";
  setenv("LOCAL_RANK", "x", 1);
  EXPECT_EQ(nvml_device_for_process(), 0);
  unsetenv("LOCAL_RANK");
  unsetenv("CUDA_VISIBLE_DEVICES");
}

}  // namespace
}  // namespace partrain::profiler
