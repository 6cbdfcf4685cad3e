#include "profiler/flight/flight_dumper.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"

namespace partrain::profiler {

namespace {

// Writes `text` to a new file at `path`, every byte and its close checked (a full disk may show
// only at close): 0, or the errno of the first failure.
int write_whole_file(const std::filesystem::path& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int error = 0;
  while (!text.empty() && error == 0) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written > 0) {
      text.remove_prefix(static_cast<size_t>(written));
    } else if (written == 0 || errno != EINTR) {
      error = written == 0 ? EIO : errno;
    }
  }
  if (::close(fd) != 0 && error == 0 && errno != EINTR) error = errno;
  return error;
}

bool unfinished(const CollectiveEvent& e) {
  return e.state == CollectiveState::kEnqueued || e.state == CollectiveState::kStarted;
}

}  // namespace

std::filesystem::path flight_dump_path(const std::filesystem::path& dir, int rank, int attempt) {
  if (attempt == 0) return dir / fmt::format("rank_{}.json", rank);
  return dir / fmt::format("rank_{}.restart{}.json", rank, attempt);
}

FlightDumper::FlightDumper(profiler::FlightRecorder& recorder, FlightDumperOptions options)
    : recorder_(recorder), options_(std::move(options)) {}

bool FlightDumper::dump(profiler::DumpTrigger trigger, std::string reason, bool after_program_end) {
  std::lock_guard lock(mutex_);
  if (dumped_) return false;
  dumped_ = true;
  profiler::FlightDump dump;
  dump.rank = options_.rank;
  dump.attempt = options_.attempt;
  dump.trigger = trigger;
  dump.reason = std::move(reason);
  dump.dumped_ns = monotonic_ns();
  dump.total_recorded = recorder_.total_recorded();
  dump.entries = recorder_.final_snapshot();
  dump.after_program_end = after_program_end;
  write_file(dump);
  const bool news = trigger == profiler::DumpTrigger::kWatchdog ||
                    trigger == profiler::DumpTrigger::kCollectiveError;
  const bool printed =
      trigger == profiler::DumpTrigger::kWatchdog ||
      (trigger == profiler::DumpTrigger::kCollectiveError && options_.print_collective_error);
  if (printed) {
    std::string text = profiler::format_flight_dump(dump, options_.stderr_entries);
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  }
  write_trace(dump, news);
  return true;
}

void FlightDumper::write_file(const profiler::FlightDump& dump) const {
  if (!options_.dir) return;
  const std::filesystem::path path =
      flight_dump_path(*options_.dir, options_.rank, options_.attempt);
  // Written beside and renamed, so the launcher never reads half a dump.
  const std::filesystem::path partial = path.string() + ".partial";
  const int error = write_whole_file(partial, profiler::flight_dump_to_json(dump));
  if (error != 0) {
    // A full disk (ENOSPC), the file-size limit (EFBIG): no dump rather than a truncated one.
    ::unlink(partial.c_str());
    log::warn("rank {}: the flight-recorder dump could not be written ({}): {}", options_.rank,
              std::strerror(error), partial.string());
    return;
  }
  std::error_code renamed;
  std::filesystem::rename(partial, path, renamed);
  if (renamed) {
    ::unlink(partial.c_str());
    log::warn("rank {}: the flight-recorder dump could not be written ({}): {}", options_.rank,
              renamed.message(), path.string());
  }
}

void FlightDumper::write_trace(const profiler::FlightDump& dump, bool with_stat) const {
  profiler::RankTracer* tracer = options_.tracer;
  if (tracer == nullptr) return;
  // Finished operations reached the trace when they finished; the unfinished ones get a row
  // now, with their state, their slice running up to the dump (how long they had waited).
  for (const CollectiveEvent& entry : dump.entries) {
    if (!unfinished(entry)) continue;
    CollectiveEvent row = entry;
    if (row.state == CollectiveState::kEnqueued) row.start_ns = row.enqueue_ns;
    row.end_ns = dump.dumped_ns;
    tracer->collective(row);
  }
  if (!with_stat) return;
  profiler::StatEvent stat;
  stat.name =
      dump.trigger == profiler::DumpTrigger::kWatchdog ? "collective_watchdog" : "collective_error";
  stat.rank = options_.rank;
  stat.value = 1;
  stat.severity = profiler::StatSeverity::kError;
  stat.description = dump.reason;
  tracer->emit(stat);
}

}  // namespace partrain::profiler
