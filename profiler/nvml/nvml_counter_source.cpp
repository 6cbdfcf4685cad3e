#include "profiler/nvml/nvml_counter_source.h"

#include <dlfcn.h>

#include <charconv>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "profiler/nvml/nvml_abi.h"

namespace partrain::profiler {
namespace {

// The library stays loaded for the process's life once NVML is initialised: unloading a driver
// library with threads of its own is not safe.
class NvmlCounterSource final : public GpuCounterSource {
 public:
  struct Api {
    nvml::DeviceGetUtilizationRatesFn utilization = nullptr;
    nvml::DeviceGetClockInfoFn clock = nullptr;
    nvml::DeviceGetPowerUsageFn power = nullptr;
    nvml::DeviceGetClockReasonsFn reasons = nullptr;
  };
  NvmlCounterSource(Api api, nvml::Device device, int index)
      : api_(api), device_(device), index_(index) {}

  int device_index() const override { return index_; }

  // A quantity the device does not support (or whose call is missing) is not asked again.
  GpuCounterReading read() override {
    GpuCounterReading reading;
    if (api_.utilization) {
      nvml::Utilization rates{};
      const nvml::Return rc = api_.utilization(device_, &rates);
      if (rc == nvml::kSuccess) reading.utilization_pct = rates.gpu;
      else if (rc == nvml::kErrorNotSupported) api_.utilization = nullptr;
    }
    if (api_.clock) {
      unsigned int mhz = 0;
      const nvml::Return rc = api_.clock(device_, nvml::kClockSm, &mhz);
      if (rc == nvml::kSuccess) reading.sm_clock_mhz = mhz;
      else if (rc == nvml::kErrorNotSupported) api_.clock = nullptr;
    }
    if (api_.power) {
      unsigned int milliwatts = 0;
      const nvml::Return rc = api_.power(device_, &milliwatts);
      if (rc == nvml::kSuccess) reading.power_w = milliwatts / 1000.0;
      else if (rc == nvml::kErrorNotSupported) api_.power = nullptr;
    }
    if (api_.reasons) {
      unsigned long long bits = 0;
      const nvml::Return rc = api_.reasons(device_, &bits);
      if (rc == nvml::kSuccess) reading.throttle_reasons = bits;
      else if (rc == nvml::kErrorNotSupported) api_.reasons = nullptr;
    }
    return reading;
  }

 private:
  Api api_;
  nvml::Device device_;
  int index_;
};

template <typename Fn>
Fn symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

std::optional<int> parse_index(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

}  // namespace

int nvml_device_for_cuda_device(int cuda_device) {
  if (const std::optional<std::string> visible = env::get("CUDA_VISIBLE_DEVICES")) {
    std::vector<std::string_view> entries;
    std::string_view rest = *visible;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      entries.push_back(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    if (cuda_device >= 0 && static_cast<size_t>(cuda_device) < entries.size()) {
      if (std::optional<int> index = parse_index(entries[cuda_device])) return *index;
    }
  }
  return cuda_device;
}

int nvml_device_for_process() {
  const std::optional<std::string> local_rank_text = env::get("LOCAL_RANK");
  const std::optional<int> local_rank =
      local_rank_text ? parse_index(*local_rank_text) : std::nullopt;
  return local_rank ? nvml_device_for_cuda_device(*local_rank) : 0;
}

StatusOr<std::unique_ptr<GpuCounterSource>> open_nvml_counter_source(int index) {
  void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return unavailable("NVML is not installed (no libnvidia-ml.so.1)");
  const auto init = symbol<nvml::InitFn>(library, "nvmlInit_v2");
  const auto error_string = symbol<nvml::ErrorStringFn>(library, "nvmlErrorString");
  const auto handle_by_index =
      symbol<nvml::DeviceGetHandleByIndexFn>(library, "nvmlDeviceGetHandleByIndex_v2");
  if (init == nullptr || handle_by_index == nullptr) {
    dlclose(library);
    return failed("libnvidia-ml.so.1 lacks nvmlInit_v2 or nvmlDeviceGetHandleByIndex_v2");
  }
  auto describe = [&](nvml::Return rc) {
    return error_string != nullptr ? std::string(error_string(rc)) : "error " + std::to_string(rc);
  };
  if (const nvml::Return rc = init(); rc != nvml::kSuccess) {
    const std::string message = describe(rc);
    dlclose(library);
    return failed("NVML cannot be initialised: {}", message);
  }
  nvml::Device device = nullptr;
  if (const nvml::Return rc = handle_by_index(static_cast<unsigned int>(index), &device);
      rc != nvml::kSuccess) {
    return failed("NVML has no GPU {}: {}", index, describe(rc));
  }
  NvmlCounterSource::Api api;
  api.utilization =
      symbol<nvml::DeviceGetUtilizationRatesFn>(library, "nvmlDeviceGetUtilizationRates");
  api.clock = symbol<nvml::DeviceGetClockInfoFn>(library, "nvmlDeviceGetClockInfo");
  api.power = symbol<nvml::DeviceGetPowerUsageFn>(library, "nvmlDeviceGetPowerUsage");
  api.reasons =
      symbol<nvml::DeviceGetClockReasonsFn>(library, "nvmlDeviceGetCurrentClocksEventReasons");
  if (api.reasons == nullptr) {
    api.reasons = symbol<nvml::DeviceGetClockReasonsFn>(
        library, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  return std::unique_ptr<GpuCounterSource>(new NvmlCounterSource(api, device, index));
}

}  // namespace partrain::profiler
