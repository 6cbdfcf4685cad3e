// The CUPTI activity session of one traced process (injected, or a partrain rank on a GPU): libcupti loaded with dlopen (whichever
// the program's CUDA brought, else the toolkit's), the run's clock installed as CUPTI's
// timestamp source, CONCURRENT_KERNEL, MEMCPY, MEMSET, MEMORY2, EXTERNAL_CORRELATION and
// SYNCHRONIZATION enabled (RUNTIME and DRIVER with PARTRAIN_CUPTI_API=1), buffers from a bounded
// pool, completed buffers parsed and translated, dropped records counted into `stat`.
#pragma once

#include <memory>

#include "profiler/gpu_tracing.h"

namespace partrain::profiler::cupti {

std::unique_ptr<GpuTracing> start_session(GpuTraceSink& sink);

}  // namespace partrain::profiler::cupti
