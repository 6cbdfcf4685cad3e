// What launchers killed with SIGKILL leave behind, since they get no chance to clean up: their
// private directories in the temporary directory (<temp>/partrain-flight-<pid>-XXXXXX for the
// flight dumps, <temp>/partrain-summary-<pid>-XXXXXX for a --json run's summary,
// <temp>/partrain-inject-<pid>-XXXXXX for the links to the injection, injection_links.h) and their
// collector's socket directory (<collector base>/<run id>/collector-<pid>.sock). Each launcher
// removes those of launchers that are gone before it starts its own.
#pragma once

#include <filesystem>
#include <string_view>

#include "core/status.h"

namespace partrain::launch {

// The name of a --json run's summary directory: this prefix, the launcher's pid, '-' and a
// random suffix (as the flight dumps', kFlightDirPrefix).
inline constexpr std::string_view kSummaryDirPrefix = "partrain-summary-";

// A new private directory (0700, made by mkdtemp: nothing another user planted in a shared
// TMPDIR is used) named <prefix><launcher pid>-XXXXXX in `temp` (core's temporary_directory()
// unless given), for `what`; kFailed naming the directory and the reason when it cannot be made.
StatusOr<std::filesystem::path> make_launcher_dir(std::string_view prefix, std::string_view what);
StatusOr<std::filesystem::path> make_launcher_dir(std::string_view prefix, std::string_view what,
                                                  const std::filesystem::path& temp);

// Removes, of this user's, the flight-dump and summary directories in `temp_dir` whose launcher
// pid is dead,
// and the run directories under `collector_base` whose every socket belongs to a dead pid (or
// that have stood empty for a minute: a live launcher makes its directory just before binding).
// A live pid keeps its files, even one reused by another program. Returns how many directories
// it removed; failures are logged at debug and never stop a launch.
int remove_stale_launcher_dirs(const std::filesystem::path& temp_dir,
                               const std::filesystem::path& collector_base);
// The same in core's temporary_directory() and profiler::collector_base_dir().
int remove_stale_launcher_dirs();

}  // namespace partrain::launch
