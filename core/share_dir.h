// Where partrain's data files live (share/: model and GPU presets, SQL views, completions):
// $PARTRAIN_SHARE_DIR, else installed beside the binary (<prefix>/share/partrain for
// <prefix>/bin/partrain), else the source tree the binary was built from.
#pragma once

#include <filesystem>
#include <vector>

#include "core/status.h"

namespace partrain {

// The places looked at, in order (an unset or empty PARTRAIN_SHARE_DIR is skipped).
std::vector<std::filesystem::path> share_dir_candidates();
// The first candidate that is a directory; kUnreadable listing where it looked otherwise.
StatusOr<std::filesystem::path> find_share_dir();

}  // namespace partrain
