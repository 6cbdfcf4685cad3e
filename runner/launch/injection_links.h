// The injection's paths as LD_PRELOAD and PYTHONPATH can name them. ld.so splits LD_PRELOAD at
// spaces and colons and Python splits PYTHONPATH at colons, so a partrain installed under
// "/opt/my tools" or "/sw/a:b" was silently not loaded into the command's processes (an empty
// trace, exit 0). Such a path is named through a symbolic link in a private directory of this
// launcher's whose own path holds neither character.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "runner/launch/traced_command.h"

namespace partrain::launch {

// Its name in the temporary directory: this prefix, the launcher's pid, '-' and a random suffix
// (a launcher killed before it could remove it is recognised as gone: stale_launcher_dirs.h).
inline constexpr std::string_view kInjectionLinkDirPrefix = "partrain-inject-";

// Whether `path` reads as one entry of LD_PRELOAD and of PYTHONPATH: no space, tab, newline or ':'.
bool is_search_path_safe(std::string_view path);

class InjectionLinks {
 public:
  // `found` as is when its paths are safe; else each unsafe one replaced by a link to it in a new
  // directory (0700) under the first of `temp_dirs` whose path is safe and that takes it. An
  // error that says what to do when no such directory can be made: the command would run
  // untraced.
  static StatusOr<InjectionLinks> make(const InjectionPaths& found,
                                       const std::vector<std::filesystem::path>& temp_dirs);
  // The same under $TMPDIR (the system's temporary directory), /tmp or /dev/shm.
  static StatusOr<InjectionLinks> make(const InjectionPaths& found);
  InjectionLinks(InjectionLinks&& other) noexcept;
  InjectionLinks& operator=(InjectionLinks&&) = delete;
  InjectionLinks(const InjectionLinks&) = delete;
  ~InjectionLinks();  // removes the directory and its links

  // What the command's environment names (add_injection_environment).
  const InjectionPaths& paths() const { return paths_; }
  // The links' directory; empty when no link was needed.
  const std::filesystem::path& dir() const { return dir_; }

 private:
  InjectionLinks(InjectionPaths paths, std::filesystem::path dir)
      : paths_(std::move(paths)), dir_(std::move(dir)) {}

  InjectionPaths paths_;
  std::filesystem::path dir_;  // empty once moved from, or when no link was needed
};

}  // namespace partrain::launch
