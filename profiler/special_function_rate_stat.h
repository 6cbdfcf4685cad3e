// The special_function_rate stat: evaluations per second of the GeLU's tanh that a CPU rank's core
// measured at start (runner/device/cpu_device.h), one per rank; the calibration takes the best.
// Written by the built-in workloads, read by `recommend --calibrate`, which costs the MLP
// activation by it where the preset says a special function paces it (analyzers/compute_cost.h).
#pragma once

#include <string_view>

namespace partrain::profiler {

inline constexpr std::string_view kSpecialFunctionRateStat = "special_function_rate";

}  // namespace partrain::profiler
