#include "runner/launch/injection_links.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/log.h"
#include "core/temp_dir.h"
#include "runner/launch/stale_launcher_dirs.h"

namespace partrain::launch {
namespace fs = std::filesystem;
namespace {

// A new private directory under the first usable of `temp_dirs`, or why none was made.
StatusOr<fs::path> make_link_dir(const std::vector<fs::path>& temp_dirs) {
  std::vector<std::string> tried;
  for (const fs::path& temp : temp_dirs) {
    if (!is_search_path_safe(temp.string())) {
      tried.push_back(fmt::format("{} (holds a space or ':' itself)", temp.string()));
      continue;
    }
    auto dir = make_launcher_dir(kInjectionLinkDirPrefix, "the links", temp);
    if (dir.is_ok()) return dir;
    tried.push_back(fmt::format("{} ({})", temp.string(), dir.status().message()));
  }
  return failed("no directory for them could be made in {}", fmt::join(tried, ", "));
}

}  // namespace

bool is_search_path_safe(std::string_view path) {
  return path.find_first_of(" \t\n:") == std::string_view::npos;
}

StatusOr<InjectionLinks> InjectionLinks::make(const InjectionPaths& found,
                                              const std::vector<fs::path>& temp_dirs) {
  auto unsafe = [](const std::optional<std::string>& path) {
    return path && !is_search_path_safe(*path);
  };
  if (!unsafe(found.library) && !unsafe(found.python_module)) return InjectionLinks(found, {});
  auto dir = make_link_dir(temp_dirs);
  if (!dir.is_ok()) {
    const std::string& path = unsafe(found.library) ? *found.library : *found.python_module;
    return failed(
        "partrain is installed under a path with a space or ':' ({}), which LD_PRELOAD and "
        "PYTHONPATH cannot name, and links to it {}: the command's processes would not be "
        "traced. Install partrain under a path without spaces or colons, or set TMPDIR to a "
        "writable directory whose path has none",
        path, dir.status().message());
  }
  InjectionLinks links(found, *dir);  // removes the directory if a link fails
  auto link = [&](std::optional<std::string>& path, const char* name) -> Status {
    if (!unsafe(path)) return Status::ok();
    const fs::path alias = *dir / name;
    std::error_code error;
    fs::create_symlink(*path, alias, error);
    if (error) {
      return failed("cannot link {} to {}: {}", alias.string(), *path, error.message());
    }
    log::debug("{} is named through {} (its path holds a space or ':')", *path, alias.string());
    path = alias.string();
    return Status::ok();
  };
  RETURN_IF_ERROR(link(links.paths_.library, "libpartrain_inject.so"));
  RETURN_IF_ERROR(link(links.paths_.python_module, "python"));
  return links;
}

StatusOr<InjectionLinks> InjectionLinks::make(const InjectionPaths& found) {
  // The temporary directory the next launch reaps a killed launcher's directories from first.
  return make(found, {temporary_directory(), "/tmp", "/dev/shm"});
}

InjectionLinks::InjectionLinks(InjectionLinks&& other) noexcept
    : paths_(std::move(other.paths_)), dir_(std::move(other.dir_)) {
  other.dir_.clear();
}

InjectionLinks::~InjectionLinks() {
  if (dir_.empty()) return;
  std::error_code error;
  fs::remove_all(dir_, error);
  if (error) log::warn("cannot remove {}: {}", dir_.string(), error.message());
}

}  // namespace partrain::launch
