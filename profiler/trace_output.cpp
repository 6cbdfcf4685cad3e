#include "profiler/trace_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/output_path.h"
#include "profiler/trace_open.h"
#include "profiler/trace_writer.h"

namespace partrain::profiler {
namespace fs = std::filesystem;

Status check_trace_output(const fs::path& output, bool overwrite, std::string_view what) {
  std::error_code error;
  const fs::path dir = fs::absolute(output).parent_path();
  if (!fs::is_directory(dir, error)) {
    return invalid_argument("cannot write {}: the directory {} does not exist", output.string(),
                            dir.string());
  }
  const OutputKind kind = output_kind(output);
  if (kind == OutputKind::kDirectory || kind == OutputKind::kSpecial) {
    return invalid_argument("{} is {}, not a file: name a file for the {}", output.string(),
                            kind == OutputKind::kDirectory ? "a directory" : "a device or FIFO",
                            what);
  }
  if (kind == OutputKind::kRegularFile) {
    if (!overwrite) {
      return invalid_argument(
          "{} already exists: choose another output or pass --force to "
          "replace it",
          output.string());
    }
    if (writer_alive(output)) {
      return invalid_argument(
          "{} is being written by a live run (its lock {} is held); it cannot "
          "be replaced",
          output.string(), writer_lock_path(output).string());
    }
  }
  return Status::ok();
}

Status sync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return failed("cannot open {}: {}", path.string(), std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return failed("cannot sync {}: {}", path.string(), std::strerror(errno));
  return Status::ok();
}

Status rename_trace_into_place(const fs::path& temporary, const fs::path& output) {
  std::error_code error;
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(output.string() + suffix, error);
  fs::rename(temporary, output, error);
  if (error) {
    return failed("cannot rename {} to {}: {}", temporary.string(), output.string(),
                  error.message());
  }
  const fs::path dir = output.parent_path().empty() ? fs::path(".") : output.parent_path();
  return sync_path(dir, O_RDONLY | O_DIRECTORY);
}

}  // namespace partrain::profiler
