// `partrain import` of Nsight Systems reports exported to SQLite (`nsys export --type sqlite`):
// one report per rank, or one report of `nsys profile torchrun ...` holding every local rank
// (each process that ran CUDA work or NCCL calls is a rank). Built from NVIDIA's documented
// export schema (docs/import.md lists the tables and columns read); an export of a schema
// version outside those known is refused rather than misread.
#pragma once

#include <filesystem>

#include "core/status.h"
#include "profiler/import/trace_import.h"

namespace partrain::profiler {

// Whether the file starts with SQLite's header ("SQLite format 3").
bool is_sqlite_file(const std::filesystem::path& path);

// Errors: kUnreadable (exit 3) naming the file for what is no nsys export, an unknown export
// schema version, two reports of one rank, world sizes that disagree; kInvalidArgument (exit 2)
// for the output or a bad step marker; kFailed when the output cannot be written.
StatusOr<TraceImportSummary> import_nsys_reports(const TraceImportOptions& options);

}  // namespace partrain::profiler
