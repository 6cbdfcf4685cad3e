// The gemm_rate stat: FLOP/s a rank's GEMMs (its linear layers and LM head) achieved over the
// run's steps (Device::gemm_totals), one per rank, written at the run's end. Written by the
// built-in workloads, read by `recommend --calibrate`, which costs the GEMMs at it where the runs'
// mixes of GEMM and memory-bound work cannot tell the two rates apart (analyzers/calibration.h).
#pragma once

#include <string_view>

namespace partrain::profiler {

inline constexpr std::string_view kGemmRateStat = "gemm_rate";

}  // namespace partrain::profiler
