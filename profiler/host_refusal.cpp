#include "profiler/host_refusal.h"

#include <fmt/format.h>

#include <chrono>
#include <string>

#include "core/log.h"

namespace partrain::profiler {

void report_host_refusal(RankTracer& tracer, std::string_view stat, const Status& why,
                         std::string_view what_is_lost) {
  log::warn("rank {}: {}: {}", tracer.rank(), why.message(), what_is_lost);
  tracer.emit(StatEvent{std::string(stat), tracer.rank(), 1, StatSeverity::kDataLoss,
                        fmt::format("{}: {}", why.message(), what_is_lost)});
  // Shipped now: without its threads the process may end before anything else ships it (a
  // shell's exit is an _exit, and the flush before _exit may be the piece refused).
  (void)tracer.flush(std::chrono::milliseconds(500));
}

}  // namespace partrain::profiler
