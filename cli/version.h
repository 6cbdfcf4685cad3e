// `partrain --version`: the version and every compiled-in backend with its version.
#pragma once

#include <string>

namespace partrain::cli {

std::string version_text();

}  // namespace partrain::cli
