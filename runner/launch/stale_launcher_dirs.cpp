#include "runner/launch/stale_launcher_dirs.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>

#include "core/log.h"
#include "core/temp_dir.h"
#include "profiler/collector.h"
#include "runner/launch/flight_dump_dir.h"
#include "runner/launch/injection_links.h"

namespace partrain::launch {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kSocketPrefix = "collector-";
constexpr std::string_view kSocketSuffix = ".sock";
constexpr auto kEmptyDirGrace = std::chrono::minutes(1);

// The leading decimal pid of `text` ("1234-Ab3dEf", "1234.sock"), if any.
std::optional<pid_t> leading_pid(std::string_view text) {
  pid_t pid = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (error != std::errc() || end == text.data() || pid <= 0) return std::nullopt;
  return pid;
}

// Dead, or a zombie nobody has reaped yet (an init that reaps slowly keeps killed launchers so).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t command_end = line.rfind(')');  // the command may hold spaces and parentheses
  return command_end != std::string::npos && command_end + 2 < line.size() &&
         line[command_end + 2] == 'Z';
}

bool owned_by_me(const fs::path& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == ::getuid();
}

bool remove_dir(const fs::path& dir) {
  std::error_code error;
  fs::remove_all(dir, error);
  if (error) {
    log::debug("cannot remove the stale {}: {}", dir.string(), error.message());
    return false;
  }
  log::debug("removed {}, left by a launcher that is gone", dir.string());
  return true;
}

// A run's collector directory is stale when every entry is a collector-<pid>.sock of a dead pid,
// or when it is empty and older than the grace (a launcher between mkdir and bind).
bool collector_dir_is_stale(const fs::path& dir) {
  std::error_code error;
  bool any = false;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    any = true;
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kSocketPrefix) || !name.ends_with(kSocketSuffix)) return false;
    const std::optional<pid_t> pid =
        leading_pid(std::string_view(name).substr(kSocketPrefix.size()));
    if (!pid || !process_gone(*pid)) return false;
  }
  if (error) return false;
  if (any) return true;
  const auto modified = fs::last_write_time(dir, error);
  return !error && fs::file_time_type::clock::now() - modified > kEmptyDirGrace;
}

}  // namespace

int remove_stale_launcher_dirs(const fs::path& temp_dir, const fs::path& collector_base) {
  int removed = 0;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(temp_dir, error)) {
    const std::string name = entry.path().filename().string();
    for (const std::string_view prefix :
         {kFlightDirPrefix, kSummaryDirPrefix, kInjectionLinkDirPrefix}) {
      if (!name.starts_with(prefix) || !owned_by_me(entry.path())) continue;
      const std::optional<pid_t> pid = leading_pid(std::string_view(name).substr(prefix.size()));
      if (pid && process_gone(*pid) && remove_dir(entry.path())) ++removed;
    }
  }
  // A collector directory made in place of an unusable base (profiler/collector.h).
  for (const fs::directory_entry& entry : fs::directory_iterator(temp_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(profiler::kFallbackCollectorDirPrefix) && owned_by_me(entry.path()) &&
        collector_dir_is_stale(entry.path()) && remove_dir(entry.path())) {
      ++removed;
    }
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(collector_base, error)) {
    if (owned_by_me(entry.path()) && collector_dir_is_stale(entry.path()) &&
        remove_dir(entry.path())) {
      ++removed;
    }
  }
  return removed;
}

int remove_stale_launcher_dirs() {
  return remove_stale_launcher_dirs(temporary_directory(), profiler::collector_base_dir());
}

StatusOr<fs::path> make_launcher_dir(std::string_view prefix, std::string_view what) {
  return make_launcher_dir(prefix, what, temporary_directory());
}

StatusOr<fs::path> make_launcher_dir(std::string_view prefix, std::string_view what,
                                     const fs::path& temp) {
  // The launcher's pid in the name: a launcher killed before it could remove the directory is
  // recognised as gone by the next one.
  std::string pattern = (temp / fmt::format("{}{}-XXXXXX", prefix, ::getpid())).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return failed("cannot create a directory for {} in {}: {}", what, temp.string(),
                  std::strerror(errno));
  }
  return fs::path(pattern);
}

}  // namespace partrain::launch
