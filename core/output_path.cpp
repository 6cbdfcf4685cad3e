#include "core/output_path.h"

#include <system_error>

namespace partrain {

namespace fs = std::filesystem;

fs::path follow_links(const fs::path& path) {
  // Link by link, as the kernel does (up to its 40 hops): weakly_canonical alone stops at a
  // link whose target is not there yet, and the link itself would be replaced.
  constexpr int kMaxHops = 40;
  fs::path current = path;
  std::error_code error;
  for (int hop = 0; fs::is_symlink(fs::symlink_status(current, error)); ++hop) {
    if (hop == kMaxHops) return path;  // a loop: writing `path` then fails as the kernel says
    const fs::path target = fs::read_symlink(current, error);
    if (error) return path;
    current = target.is_absolute() ? target : current.parent_path() / target;
  }
  if (current == path) return path;
  const fs::path resolved = fs::weakly_canonical(current, error);
  return error ? current : resolved;
}

OutputKind output_kind(const fs::path& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  switch (status.type()) {
    case fs::file_type::not_found:
    case fs::file_type::none:
      return OutputKind::kAbsent;
    case fs::file_type::regular:
      return OutputKind::kRegularFile;
    case fs::file_type::directory:
      return OutputKind::kDirectory;
    default:
      return OutputKind::kSpecial;
  }
}

}  // namespace partrain
