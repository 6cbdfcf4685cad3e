// One rank's flight-recorder dump: why the rank dumped, and the recorder's ring (comm, seq, op,
// bytes, state, times of its last collectives and transfers). The rank writes it as JSON for its
// launcher (one file per rank, read back by the launcher's diagnosis) and as text on stderr.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/collective_event.h"

namespace partrain::profiler {

// What made the rank dump. kWatchdog and kCollectiveError are a rank's own verdict on a
// collective; kRankError is a rank failing outside any collective (out of memory, ...) and
// kSignal a rank stopped by its launcher: both dump what they held so the diagnosis sees every
// rank (a rank stuck or failing in compute has nothing in flight for a watchdog to fire on).
enum class DumpTrigger { kWatchdog, kCollectiveError, kRankError, kSignal };
std::string_view dump_trigger_name(DumpTrigger trigger);

struct FlightDump {
  int rank = 0;  // world rank
  // torchrun's restarts of the job before this rank's attempt (TORCHELASTIC_RESTART_COUNT): the
  // dumps of one attempt are diagnosed together, never with another attempt's.
  int attempt = 0;
  DumpTrigger trigger = DumpTrigger::kWatchdog;
  std::string reason;           // one line: "all_reduce (world, seq 12) not completed after 2.0 s"
  int64_t dumped_ns = 0;        // the rank's monotonic clock (entries' times are on it too)
  uint64_t total_recorded = 0;  // operations ever recorded: more than entries.size() once the
                                // ring wrapped, and then the oldest ones are gone
  std::vector<profiler::CollectiveEvent> entries;  // oldest first
  // A kSignal dump taken after the rank's program had ended (partrain's Python atexit handler
  // had run): the signal came in the interpreter's shutdown, after the program's work.
  bool after_program_end = false;
};

std::string flight_dump_to_json(const FlightDump& dump);
// kUnreadable naming the problem when the text is not a dump. Op, dtype and reduction names
// outside the trace's vocabulary read as "other".
StatusOr<FlightDump> flight_dump_from_json(std::string_view text);

// The stderr form: a header line (rank, trigger, reason) and the last `last_n` entries plus every
// unfinished one, one per line: "  world seq 12 all_reduce 4 B float started 2.01 s ago".
std::string format_flight_dump(const FlightDump& dump, size_t last_n);

}  // namespace partrain::profiler
