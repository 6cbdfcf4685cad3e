// A rank's flight-recorder dump, made once, by whoever asks first: the collective watchdog, a
// failed collective, or the launcher's stop signal. It goes to a JSON file in the launcher's
// flight directory (PARTRAIN_FLIGHT_DIR, read back for the diagnosis), into the trace when the
// rank is traced (its unfinished operations as collective rows with their state, so the trace
// shows where every rank stood), and, for the watchdog and collective errors, to stderr (the
// last entries and every unfinished one) with a `collective_watchdog` / `collective_error` stat
// row. A rank that failed in compute or was stopped by its launcher prints nothing and adds no
// stat: its dump is evidence for the diagnosis, not news.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

#include "profiler/flight/flight_dump.h"
#include "profiler/flight/flight_recorder.h"
#include "profiler/rank_tracer.h"

namespace partrain::profiler {

inline constexpr const char* kFlightDirEnv = "PARTRAIN_FLIGHT_DIR";

struct FlightDumperOptions {
  int rank = 0;
  std::optional<std::filesystem::path> dir;  // where rank_<R>.json goes; unset: no file
  profiler::RankTracer* tracer = nullptr;    // unset: not traced
  size_t stderr_entries = 16;                // the last entries printed (unfinished ones always)
  int attempt = restart_attempt_from_env();  // torchrun's restarts before this attempt
  // false: a collective error's dump is not printed (a PyTorch rank's traceback follows it, and
  // the launcher's tail of the rank's stderr is to show that); its stat row still says it.
  bool print_collective_error = true;
};

// <dir>/rank_<rank>.json for the first attempt, <dir>/rank_<rank>.restart<N>.json for the
// attempt after torchrun's N-th restart: one file per rank and attempt, so neither ranks nor a
// restarted rank and its earlier self write the same file.
std::filesystem::path flight_dump_path(const std::filesystem::path& dir, int rank, int attempt = 0);

class FlightDumper {
 public:
  // `recorder` must outlive the dumper.
  FlightDumper(profiler::FlightRecorder& recorder, FlightDumperOptions options);

  // Dumps unless a dump was made already (the first cause is the one worth keeping); returns
  // whether this call dumped. A second caller waits until the first dump is written.
  // `after_program_end`: FlightDump's.
  bool dump(profiler::DumpTrigger trigger, std::string reason, bool after_program_end = false);

 private:
  void write_file(const profiler::FlightDump& dump) const;
  void write_trace(const profiler::FlightDump& dump, bool with_stat) const;

  profiler::FlightRecorder& recorder_;
  const FlightDumperOptions options_;
  std::mutex mutex_;
  bool dumped_ = false;  // guarded by mutex_
};

}  // namespace partrain::profiler
