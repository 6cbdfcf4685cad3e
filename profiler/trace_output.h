// Where a command creates a trace file from others (`merge`, `import`): the checks before it
// writes anything (the rules of docs/trace-format.md: an existing file is replaced only when
// asked, never a live trace, a directory or a device), and the durable rename of the finished
// temporary file into place.
#pragma once

#include <filesystem>
#include <string_view>

#include "core/status.h"

namespace partrain::profiler {

// kInvalidArgument (exit 2) naming the problem: the output's directory does not exist, it is a
// directory or device, it exists (without `overwrite`), a live writer holds it. `what` names the
// file in messages ("merged trace", "imported trace").
Status check_trace_output(const std::filesystem::path& output, bool overwrite,
                          std::string_view what);

// fsync of a file (flags O_RDONLY) or a directory (O_RDONLY | O_DIRECTORY).
Status sync_path(const std::filesystem::path& path, int flags);

// Renames the finished, synced `temporary` over `output` and syncs the directory; side files of a
// replaced output (-wal, -shm) are removed first, or the next reader would replay them into it.
Status rename_trace_into_place(const std::filesystem::path& temporary,
                               const std::filesystem::path& output);

}  // namespace partrain::profiler
