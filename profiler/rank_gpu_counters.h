// A traced rank's GPU counters (gpu_counter_sampler.h) over NVML: the sampling period from
// PARTRAIN_NVML_INTERVAL, NVML opened for the rank's GPU, and every reading emitted through the
// rank's tracer on the run's timeline. The one start for both kinds of traced process: a foreign
// program under libpartrain_inject.so and a `partrain launch --device cuda` rank.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "core/status.h"
#include "profiler/gpu_counter_sampler.h"
#include "profiler/rank_tracer.h"

namespace partrain::profiler {

// The sampling period of PARTRAIN_NVML_INTERVAL's form: a duration ("100ms", "1s"); 0 turns the
// counters off. kInvalidArgument naming the text and the fix otherwise, for a command's flag.
StatusOr<std::chrono::milliseconds> parse_nvml_interval(std::string_view text);

// Samples GPU `nvml_device` (NVML's numbering) into `tracer` from now on, until the sampler is
// stopped or destroyed (which takes a last sample); `tracer` must outlive it. nullptr when the
// interval is 0, when there is no NVML (no driver: nothing is said) or when NVML fails (said once,
// naming NVML's error). A malformed PARTRAIN_NVML_INTERVAL is said once and the default used.
std::unique_ptr<GpuCounterSampler> start_rank_gpu_counters(RankTracer& tracer, int nvml_device);

}  // namespace partrain::profiler
