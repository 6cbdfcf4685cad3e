#include "profiler/flight/flight_dumper.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"

namespace partrain::profiler {
namespace {

bool unfinished(const CollectiveEvent& e) {
  return e.state == CollectiveState::kEnqueued || e.state == CollectiveState::kStarted;
}

}  // namespace

int restart_attempt_from_env() {
  const StatusOr<std::optional<long long>> count = env::get_int("TORCHELASTIC_RESTART_COUNT");
  if (!count.is_ok() || !count->has_value() || **count < 0) return 0;
  return static_cast<int>(**count);
}

std::filesystem::path flight_dump_path(const std::filesystem::path& dir, int rank, int attempt) {
  if (attempt == 0) return dir / fmt::format("rank_{}.json", rank);
  return dir / fmt::format("rank_{}.restart{}.json", rank, attempt);
}

FlightDumper::FlightDumper(profiler::FlightRecorder& recorder, FlightDumperOptions options)
    : recorder_(recorder), options_(std::move(options)) {}

bool FlightDumper::dump(profiler::DumpTrigger trigger, std::string reason) {
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
  write_file(dump);
  const bool news = trigger == profiler::DumpTrigger::kWatchdog ||
                    trigger == profiler::DumpTrigger::kCollectiveError;
  if (news) {
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
  {
    std::ofstream out(partial);
    out << profiler::flight_dump_to_json(dump);
    if (!out) {
      log::warn("rank {}: cannot write the flight-recorder dump {}", options_.rank,
                partial.string());
      return;
    }
  }
  std::error_code error;
  std::filesystem::rename(partial, path, error);
  if (error) {
    log::warn("rank {}: cannot write the flight-recorder dump {}: {}", options_.rank, path.string(),
              error.message());
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
