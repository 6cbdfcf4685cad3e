// CUPTI's activity records (the struct versions of the CUPTI this build compiled against) as
// partrain's vendor-neutral GpuActivity: the one place that reads CUpti_Activity* fields. Pure:
// tests feed it records they fill in by hand. Built only where CUPTI's headers are (CUDA builds).
#pragma once

#include <cupti_activity.h>

#include <optional>

#include "profiler/gpu_activity.h"

namespace partrain::profiler::cupti {

// The record as a GpuActivity, or nullopt for a kind partrain does not record (API records,
// external ids of another tool's kind).
std::optional<GpuActivity> parse_activity(const CUpti_Activity& record);

// The external correlation kind partrain pushes around NCCL calls (CUPTI has several custom
// kinds; the PyTorch profiler uses CUSTOM0 and CUSTOM1 for its own ids).
inline constexpr CUpti_ExternalCorrelationKind kNcclCorrelationKind =
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;

}  // namespace partrain::profiler::cupti
