// CUPTI's activity records (the struct versions of the CUPTI this build compiled against) as
// partrain's vendor-neutral GpuActivity: the one place that reads CUpti_Activity* fields. Pure:
// tests feed it records they fill in by hand. Built only where CUPTI's headers are (CUDA builds).
#pragma once

#include <cupti_activity.h>

#include <optional>

#include "profiler/gpu_activity.h"

namespace partrain::profiler::cupti {

// The record as a GpuActivity, or nullopt for a kind partrain does not record (API records,
// external ids of another tool's kind). Its timestamps are CUPTI's (cuptiGetTimestamp's clock);
// adding `clock_offset_ns` (the process's monotonic clock minus CUPTI's, measured by the session)
// places them on the rank's timeline. A timestamp of 0 (unknown) stays 0.
std::optional<GpuActivity> parse_activity(const CUpti_Activity& record, int64_t clock_offset_ns);

// The external correlation kind partrain pushes around NCCL calls (CUPTI has several custom
// kinds; the PyTorch profiler uses CUSTOM0 and CUSTOM1 for its own ids).
inline constexpr CUpti_ExternalCorrelationKind kNcclCorrelationKind =
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;

}  // namespace partrain::profiler::cupti
