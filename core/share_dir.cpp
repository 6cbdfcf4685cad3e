#include "core/share_dir.h"

#include <system_error>

#include "core/env.h"

namespace partrain {

std::vector<std::filesystem::path> share_dir_candidates() {
  std::vector<std::filesystem::path> candidates;
  if (auto dir = env::get("PARTRAIN_SHARE_DIR"); dir && !dir->empty()) candidates.emplace_back(*dir);
  std::error_code error;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) candidates.push_back(exe.parent_path().parent_path() / "share" / "partrain");
#ifdef PARTRAIN_SHARE_SOURCE_DIR
  candidates.emplace_back(PARTRAIN_SHARE_SOURCE_DIR);
#endif
  return candidates;
}

StatusOr<std::filesystem::path> find_share_dir() {
  std::string looked;
  for (const auto& candidate : share_dir_candidates()) {
    std::error_code error;
    if (std::filesystem::is_directory(candidate, error)) return candidate;
    looked += (looked.empty() ? "" : ", ") + candidate.string();
  }
  return make_status(StatusCode::kUnreadable,
                     "cannot find partrain's share/ directory (looked in: {}); set "
                     "PARTRAIN_SHARE_DIR to it", looked.empty() ? "nowhere" : looked);
}

}  // namespace partrain
