// A trace as Chrome Trace Event Format JSON (`partrain export --format chrome`), the format
// Perfetto (ui.perfetto.dev) and chrome://tracing load: a process per rank, a thread per track,
// slices, memory counters and flow arrows between matched collectives. Rows stream from the
// trace reader into JSON written as they come, so a trace of 10^8 events never sits in memory.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::profiler {

// Inclusive training steps; an open end is nullopt ("3:" is {3, nullopt}).
struct StepRange {
  std::optional<int64_t> first;
  std::optional<int64_t> last;
};

struct ChromeExportOptions {
  std::vector<int> ranks;          // empty: every rank of the trace
  std::optional<StepRange> steps;  // nullopt: the whole run
};

struct ChromeExportCounts {
  int64_t events = 0;    // entries of traceEvents: metadata, slices, counters, both ends of flows
  int64_t slices = 0;    // "X"
  int64_t counters = 0;  // "C"
  int64_t flows = 0;     // arrows; each is an "s" and an "f" event
  int ranks = 0;         // processes written
};

// Writes the whole JSON document to `out` (docs/trace-format.md, "Chrome / Perfetto export").
// kInvalidArgument: a rank not in the trace, or steps of which no rank recorded any;
// kFailed: SQLite or the stream failed (what was written so far is not a valid document).
StatusOr<ChromeExportCounts> export_chrome_trace(const TraceReader& reader,
                                                 const ChromeExportOptions& options,
                                                 std::ostream& out);

}  // namespace partrain::profiler
