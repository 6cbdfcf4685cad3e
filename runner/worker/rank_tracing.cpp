#include "runner/worker/rank_tracing.h"

#include <unistd.h>

#include <array>
#include <charconv>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "profiler/nvml/nvml_counter_source.h"
#include "profiler/rank_gpu_counters.h"

namespace partrain::runner {
namespace {

// "cuda:3" -> 3; "cuda" -> 0.
int cuda_ordinal(const std::string& device) {
  const size_t colon = device.find(':');
  if (colon == std::string::npos) return 0;
  int ordinal = 0;
  const char* first = device.data() + colon + 1;
  const char* last = device.data() + device.size();
  const auto [end, error] = std::from_chars(first, last, ordinal);
  return error == std::errc() && end == last && ordinal >= 0 ? ordinal : 0;
}

std::string host_name() {
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  return host.data();
}

}  // namespace

std::unique_ptr<RankTracing> RankTracing::from_env() {
  auto rank = env::get_int("RANK");
  if (!rank.is_ok() || !*rank) return nullptr;
  std::unique_ptr<profiler::RankTracer> tracer =
      profiler::RankTracer::from_env(static_cast<int32_t>(**rank));
  if (!tracer) return nullptr;
  return std::unique_ptr<RankTracing>(new RankTracing(std::move(tracer)));
}

RankTracing::RankTracing(std::unique_ptr<profiler::RankTracer> tracer)
    : tracer_(std::move(tracer)), gpu_sink_(*tracer_) {}

RankTracing::~RankTracing() {
  stop_gpu_tracing();
  resync_.reset();
  tracer_.reset();
}

void RankTracing::attach(WorldOptions& options) {
  options.collective_sink = [tracer = tracer_.get()](const profiler::CollectiveEvent& event) {
    tracer->collective(event);
  };
}

void RankTracing::joined(const World& world, const std::string& device) {
  profiler::RankInfo identity;
  identity.rank = world.env.rank;
  identity.local_rank = world.env.local_rank;
  if (auto node = env::get_int("GROUP_RANK"); node.is_ok() && *node) {
    identity.node = static_cast<int32_t>(**node);
  }
  identity.host = host_name();
  identity.pid = ::getpid();
  identity.device = device;
  if (device.rfind("cuda", 0) == 0) {
    // CUDA is initialised (the device was made before the world): CUPTI sees its context.
    gpu_ = profiler::start_gpu_tracing(gpu_sink_);
    if (gpu_) tracer_->set_step_listener([gpu = gpu_.get()] { gpu->flush(); });
    gpu_counters_ = profiler::start_rank_gpu_counters(
        *tracer_, profiler::nvml_device_for_cuda_device(cuda_ordinal(device)));
  }
  if (!world.clock_offset) {  // a world of one: the timeline is this host's clock
    tracer_->emit(identity);
    return;
  }
  resync_ = ClockResync::start(world.env, *world.clock_offset, world.clock_measured_ns,
                               std::move(identity), *tracer_);
}

void RankTracing::stop_gpu_tracing() {
  if (gpu_counters_) {
    gpu_counters_->stop();  // with a last sample
    gpu_counters_.reset();
  }
  if (!gpu_) return;
  tracer_->set_step_listener({});
  gpu_->stop();  // records what CUPTI still holds, through the tracer
  gpu_.reset();
}

void RankTracing::finish() {
  stop_gpu_tracing();
  if (resync_) resync_->measure_now();
  if (!tracer_->flush()) {
    log::warn("rank {}: the trace recorder did not drain within 5 s; some events may be lost",
              tracer_->rank());
  }
}

}  // namespace partrain::runner
