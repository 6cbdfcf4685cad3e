// What launchers killed with SIGKILL leave behind, since they get no chance to clean up: their
// flight-dump directory (<temp>/partrain-flight-<pid>-XXXXXX), the links to the injection
// (<temp>/partrain-inject-<pid>-XXXXXX, injection_links.h) and their collector's socket
// directory (<collector base>/<run id>/collector-<pid>.sock). Each launcher removes those of
// launchers that are gone before it starts its own.
#pragma once

#include <filesystem>

namespace partrain::launch {

// Removes, of this user's, the flight-dump directories in `temp_dir` whose launcher pid is dead,
// and the run directories under `collector_base` whose every socket belongs to a dead pid (or
// that have stood empty for a minute: a live launcher makes its directory just before binding).
// A live pid keeps its files, even one reused by another program. Returns how many directories
// it removed; failures are logged at debug and never stop a launch.
int remove_stale_launcher_dirs(const std::filesystem::path& temp_dir,
                               const std::filesystem::path& collector_base);
// The same in the system's temporary directory and profiler::collector_base_dir().
int remove_stale_launcher_dirs();

}  // namespace partrain::launch
