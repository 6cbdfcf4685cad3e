#include "profiler/gpu_tracing.h"

#ifdef PARTRAIN_HAVE_CUDA
#include "profiler/cupti/cupti_session.h"
#endif

namespace partrain::profiler {

std::unique_ptr<GpuTracing> start_gpu_tracing(GpuTraceSink& sink) {
#ifdef PARTRAIN_HAVE_CUDA
  return cupti::start_session(sink);
#else
  (void)sink;  // a CPU-only build has no CUPTI to read: NCCL calls are recorded without GPU times
  return nullptr;
#endif
}

}  // namespace partrain::profiler
