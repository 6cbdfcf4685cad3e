// Files partrain makes beside a path it was given (a trace's disk reserve and writer lock, an
// output's temporary) or in the temporary directory, where others may be able to write: opened
// without following a symbolic link at their name, and refused unless they are this user's own
// regular file, so that a link or file planted there never has its target overwritten.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string_view>

#include "core/status.h"

namespace partrain {

// Opens `path` for reading and writing, made (mode 0644 less the umask) when absent, never
// truncated here. kInvalidArgument naming `path` and `what` it is (e.g. "the trace's writer
// lock") when a symbolic link, something other than a regular file, another user's file or one
// with other hard links is there; kFailed for other errors. Returns the descriptor (O_CLOEXEC).
StatusOr<int> open_own_file(const std::filesystem::path& path, std::string_view what);

// A file new under a unique name in `dir`: `prefix` followed by random characters, made with
// O_EXCL (whatever is at a name taken, a link included, is left alone), mode 0666 less the umask
// as any new file. Open for writing (O_CLOEXEC).
struct UniqueFile {
  int fd = -1;
  std::filesystem::path path;
};
StatusOr<UniqueFile> create_unique_file(const std::filesystem::path& dir, std::string_view prefix);

}  // namespace partrain
