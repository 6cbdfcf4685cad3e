// Where a command creates a trace file from others (`merge`, `import`): the checks before it
// writes anything (the rules of docs/trace-format.md: an existing file is replaced only when
// asked, never a live trace, a directory or a device), and the durable rename of the finished
// temporary file into place.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "core/remove_on_signal.h"
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

// The file a command writes before renaming it into place: `<output>.<verb>-<pid>.tmp` beside
// the output. Its files (with SQLite's and the trace writer's companions) are removed when this
// goes without keep(), and when a signal stops the command meanwhile (core/remove_on_signal.h):
// a failed or Ctrl-C'd import or merge leaves nothing behind. Making one removes what a killed
// one (SIGKILL, a crash) left beside the same output: the `<output>.import-<pid>.tmp*` and
// `.merge-` files of processes that are gone.
class TemporaryTrace {
 public:
  TemporaryTrace(const std::filesystem::path& output, std::string_view verb);
  ~TemporaryTrace();
  TemporaryTrace(const TemporaryTrace&) = delete;
  TemporaryTrace& operator=(const TemporaryTrace&) = delete;

  const std::filesystem::path& path() const { return path_; }
  void keep() { keep_ = true; }  // it was renamed into place

 private:
  std::filesystem::path path_;
  bool keep_ = false;
  std::optional<RemoveOnSignal> on_signal_;
};

}  // namespace partrain::profiler
