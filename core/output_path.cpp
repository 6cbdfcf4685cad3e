#include "core/output_path.h"

#include <system_error>

namespace partrain {

namespace fs = std::filesystem;

fs::path follow_links(const fs::path& path) {
  std::error_code error;
  if (!fs::is_symlink(fs::symlink_status(path, error))) return path;
  fs::path target = fs::weakly_canonical(path, error);
  return error ? path : target;
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
