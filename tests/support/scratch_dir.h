// A fresh, empty directory for one test (or one fixture), removed with everything in it when the
// object goes. Unique per process and test, so tests run in parallel never share files.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace partrain::testing {

class ScratchDir {
 public:
  ScratchDir() {
    std::string name = (std::filesystem::temp_directory_path() / "partrain-test-XXXXXX").string();
    path_ = ::mkdtemp(name.data()) != nullptr ? name : std::string();
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace partrain::testing
