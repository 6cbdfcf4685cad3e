#include "profiler/trace_output.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

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

namespace {

// A trace's file and its companions: SQLite's journal, WAL and shared memory, the writer's lock
// and disk reserve.
constexpr std::array<const char*, 6> kTraceFileSuffixes = {"",         "-wal",    "-shm",
                                                           "-journal", "-writer", "-reserve"};

std::vector<std::string> trace_files(const fs::path& path) {
  std::vector<std::string> files;
  for (const char* suffix : kTraceFileSuffixes) {
    files.push_back(path.string() + suffix);
  }
  return files;
}

// The pid in "<output name>.import-<pid>.tmp..." or ".merge-", else nullopt.
std::optional<pid_t> temporary_owner(std::string_view name, std::string_view output_name) {
  if (!name.starts_with(output_name) || name.size() <= output_name.size() ||
      name[output_name.size()] != '.') {
    return std::nullopt;
  }
  name.remove_prefix(output_name.size() + 1);
  for (std::string_view verb : {"import-", "merge-"}) {
    if (!name.starts_with(verb)) continue;
    name.remove_prefix(verb.size());
    pid_t pid = 0;
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (ec != std::errc() || pid <= 0) return std::nullopt;
    const std::string_view rest(end, name.data() + name.size() - end);
    for (const char* suffix : kTraceFileSuffixes) {
      if (rest == fmt::format(".tmp{}", suffix)) return pid;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

// Removes the temporary files beside `output` whose process is gone (or is this one: a killed
// run that had this pid before).
void remove_abandoned_temporaries(const fs::path& output) {
  const fs::path dir = output.parent_path();
  const std::string output_name = output.filename().string();
  std::error_code ec;
  std::vector<fs::path> abandoned;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::optional<pid_t> pid = temporary_owner(it->path().filename().string(), output_name);
    if (!pid) continue;
    const bool gone = *pid == ::getpid() || (::kill(*pid, 0) != 0 && errno == ESRCH);
    if (gone && it->symlink_status(ec).type() == fs::file_type::regular) {
      abandoned.push_back(it->path());
    }
  }
  for (const fs::path& path : abandoned) fs::remove(path, ec);
}

}  // namespace

TemporaryTrace::TemporaryTrace(const fs::path& output, std::string_view verb) {
  const fs::path absolute = fs::absolute(output);
  remove_abandoned_temporaries(absolute);
  path_ = fs::path(absolute).concat(fmt::format(".{}-{}.tmp", verb, ::getpid()));
  on_signal_.emplace(trace_files(path_));
}

TemporaryTrace::~TemporaryTrace() {
  on_signal_.reset();
  if (keep_) return;
  std::error_code ignored;
  for (const std::string& file : trace_files(path_)) fs::remove(file, ignored);
}

}  // namespace partrain::profiler
