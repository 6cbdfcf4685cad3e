// What a refusal by the host (no thread under a process limit, no descriptor) costs a traced
// rank: the tracing never throws into the program, it goes on without the piece and says so.
#pragma once

#include <string_view>

#include "core/status.h"
#include "profiler/rank_tracer.h"

namespace partrain::profiler {

// Says on stderr what `why` costs the rank, and keeps it in the trace as a data-loss stat named
// `stat` (one row per rank), shipped at once.
void report_host_refusal(RankTracer& tracer, std::string_view stat, const Status& why,
                         std::string_view what_is_lost);

}  // namespace partrain::profiler
