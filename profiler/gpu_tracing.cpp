#include "profiler/gpu_tracing.h"

#include "profiler/gpu_trace_level.h"

#ifdef PARTRAIN_HAVE_CUDA
#include "profiler/cupti/cupti_session.h"
#endif

namespace partrain::profiler {

std::unique_ptr<GpuTracing> start_gpu_tracing(GpuTraceSink& sink) {
  // The lightest level leaves CUPTI alone, in a foreign program's injection and in a built-in
  // workload's rank alike: collectives' GPU spans come from NCCL's profiler plugin.
  if (gpu_trace_level_from_env() == GpuTraceLevel::kNccl) return nullptr;
#ifdef PARTRAIN_HAVE_CUDA
  return cupti::start_session(sink);
#else
  (void)sink;  // a CPU-only build has no CUPTI to read: NCCL calls are recorded without GPU times
  return nullptr;
#endif
}

}  // namespace partrain::profiler
