// The trace file an import creates: written under a temporary name beside the output
// (`<output>.import-<pid>.tmp`, profiler/trace_output.h's TemporaryTrace) through a TraceWriter,
// and renamed into place only once complete, so a failed or interrupted import never leaves a
// file that looks like a finished trace, nor its temporary (a killed one's is removed by the
// next import or merge of the same output). The output rules are
// those of `partrain merge`: an existing file is replaced only when asked, never a live trace,
// a directory or a device, and through a symbolic link the file it names is replaced.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "core/status.h"
#include "profiler/import/trace_import.h"
#include "profiler/trace_output.h"
#include "profiler/trace_writer.h"

namespace partrain::profiler {

class ImportOutput {
 public:
  // kInvalidArgument (exit 2) for an output that exists (without `overwrite`), is live, is a
  // directory or device, or whose directory does not exist; kFailed when it cannot be created.
  static StatusOr<std::unique_ptr<ImportOutput>> create(const std::filesystem::path& output,
                                                        bool overwrite);
  // The temporary files go unless finish() succeeded.
  ~ImportOutput();
  ImportOutput(const ImportOutput&) = delete;
  ImportOutput& operator=(const ImportOutput&) = delete;

  TraceWriter& writer() { return *writer_; }
  const std::filesystem::path& output() const { return output_; }
  const std::filesystem::path& directory() const { return directory_; }
  // Stores the run as completed, closes the writer (building the trace's indexes), makes the
  // file durable and renames it into place.
  Status finish(int64_t end_ns);

 private:
  ImportOutput() = default;
  std::filesystem::path output_;
  std::filesystem::path directory_;
  std::optional<TemporaryTrace> temporary_;
  std::unique_ptr<TraceWriter> writer_;  // after temporary_: closed before its files go
};

// Runs an importer so that an exception (a bug: bad input is a Status) ends as a Status (exit 1)
// naming `source` and what was thrown, after the ImportOutput it made has removed its temporary
// files on the way out, never as an abort that leaves them behind.
StatusOr<TraceImportSummary> import_or_status(
    std::string_view source, const std::function<StatusOr<TraceImportSummary>()>& import);

}  // namespace partrain::profiler
