#include "runner/launch/flight_dump_dir.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/log.h"
#include "profiler/flight/flight_dumper.h"
#include "runner/launch/stale_launcher_dirs.h"

namespace partrain::launch {
namespace fs = std::filesystem;

StatusOr<FlightDumpDir> FlightDumpDir::create() {
  // mkdtemp makes it 0700: only this user's ranks can leave dumps in it.
  ASSIGN_OR_RETURN(fs::path dir, make_launcher_dir(kFlightDirPrefix, "the flight-recorder dumps"));
  return FlightDumpDir(std::move(dir));
}

FlightDumpDir::FlightDumpDir(FlightDumpDir&& other) noexcept : path_(std::move(other.path_)) {
  other.path_.clear();
}

FlightDumpDir::~FlightDumpDir() {
  if (path_.empty()) return;
  std::error_code error;
  fs::remove_all(path_, error);
  if (error) log::warn("cannot remove {}: {}", path_.string(), error.message());
}

std::string FlightDumpDir::worker_env() const {
  return std::string(profiler::kFlightDirEnv) + "=" + path_.string();
}

std::vector<profiler::FlightDump> FlightDumpDir::read() const {
  std::vector<profiler::FlightDump> dumps;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(path_, error)) {
    if (entry.path().extension() != ".json") continue;  // a .partial a rank did not finish
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    StatusOr<profiler::FlightDump> dump = profiler::flight_dump_from_json(text.str());
    if (!dump.is_ok()) {
      log::warn("flight-recorder dump {}: {}", entry.path().string(), dump.status().message());
      continue;
    }
    dumps.push_back(std::move(*dump));
  }
  if (error) log::warn("cannot read {}: {}", path_.string(), error.message());
  std::sort(
      dumps.begin(), dumps.end(),
      [](const profiler::FlightDump& a, const profiler::FlightDump& b) { return a.rank < b.rank; });
  return dumps;
}

}  // namespace partrain::launch
