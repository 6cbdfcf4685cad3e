#include "runner/launch/trace_path.h"

#include <algorithm>

#include "profiler/collector.h"
#include "profiler/node_trace_name.h"

namespace partrain::launch {
namespace fs = std::filesystem;

Status check_trace_file(const std::optional<std::string>& file, std::string_view flag) {
  if (file && file->empty()) {
    return invalid_argument("{} needs a file name (an empty one would trace into nothing)", flag);
  }
  return Status::ok();
}

StatusOr<fs::path> decide_trace_path(const TracePathRequest& request) {
  RETURN_IF_ERROR(check_trace_file(request.file, "--trace"));
  std::error_code error;
  fs::path path;
  if (request.file) {
    path = profiler::node_trace_path(*request.file, request.node_rank);
  } else {
    if (Status checked = profiler::check_run_id(request.run_id); !checked.is_ok()) {
      return invalid_argument("run id {}", checked.message());
    }
    // A --run-id given again (a requeued job's): the next free <run-id>.N.db, as its log
    // directory is <run-id>.N; a file named with --trace is never chosen for the user.
    for (int attempt = 1; attempt <= 1000; ++attempt) {
      const std::string stem =
          attempt == 1 ? request.run_id : fmt::format("{}.{}", request.run_id, attempt);
      path =
          profiler::node_trace_path(fs::path(kRunsDirectory) / (stem + ".db"), request.node_rank);
      if (!fs::exists(fs::symlink_status(path, error)) &&
          std::find(request.taken.begin(), request.taken.end(), path) == request.taken.end()) {
        break;
      }
    }
  }
  const fs::file_status status = fs::status(path, error);
  if (fs::is_directory(status)) {
    return invalid_argument(
        "the trace file {0} is a directory: pass a file in it (--trace "
        "{1}) or another --trace FILE",
        path.string(), (path / "run.db").string());
  }
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    return invalid_argument(
        "the trace file {} is not a regular file (a device, a FIFO or a "
        "socket): a trace is an SQLite file, pass another --trace FILE, or "
        "--no-trace to run without one",
        path.string());
  }
  if (fs::exists(fs::symlink_status(path, error))) {
    return invalid_argument("the trace file {} already exists: remove it or pass another --trace "
                            "FILE",
                            path.string());
  }
  return path;
}

}  // namespace partrain::launch
