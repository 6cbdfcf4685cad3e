// Where a launcher's workers leave their flight-recorder dumps (PARTRAIN_FLIGHT_DIR): a private
// directory (0700) per launcher, read back once every worker is reaped and removed afterwards.
// Each rank writes rank_<R>.json itself (profiler/flight/flight_dumper.h), so no dump travels
// through a pipe or socket a dying rank might not finish writing to.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/flight/flight_dump.h"

namespace partrain::launch {

// Its name in the temporary directory: this prefix, the launcher's pid, '-' and a random suffix.
inline constexpr std::string_view kFlightDirPrefix = "partrain-flight-";

class FlightDumpDir {
 public:
  // A new directory under the system's temporary directory; kFailed when it cannot be made.
  static StatusOr<FlightDumpDir> create();
  FlightDumpDir(FlightDumpDir&& other) noexcept;
  FlightDumpDir& operator=(FlightDumpDir&&) = delete;
  FlightDumpDir(const FlightDumpDir&) = delete;
  ~FlightDumpDir();  // removes the directory and the dumps in it

  const std::filesystem::path& path() const { return path_; }
  // "PARTRAIN_FLIGHT_DIR=<path>" for every worker's environment.
  std::string worker_env() const;
  // The dumps written so far, by rank. One that does not read is skipped with a warning: a dump
  // is evidence, never a reason for the launcher to fail.
  std::vector<profiler::FlightDump> read() const;

 private:
  explicit FlightDumpDir(std::filesystem::path path) : path_(std::move(path)) {}

  std::filesystem::path path_;  // empty once moved from
};

}  // namespace partrain::launch
