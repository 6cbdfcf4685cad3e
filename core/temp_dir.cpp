#include "core/temp_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "core/log.h"

namespace partrain {

std::filesystem::path temporary_directory() {
  const char* tmpdir = std::getenv("TMPDIR");
  if (tmpdir == nullptr || *tmpdir == '\0') return "/tmp";
  struct stat info {};
  if (::stat(tmpdir, &info) == 0 && S_ISDIR(info.st_mode) && ::access(tmpdir, W_OK | X_OK) == 0) {
    // Absolute, as Python's tempfile makes it: the paths made from it are handed to ranks,
    // which may change directory before they use them.
    std::error_code error;
    std::filesystem::path absolute = std::filesystem::absolute(tmpdir, error);
    if (!error) return absolute.lexically_normal();
  }
  log::debug("TMPDIR={} is no directory this user can write into: temporary files go to /tmp",
             tmpdir);
  return "/tmp";
}

}  // namespace partrain
