// `partrain import` of PyTorch profiler traces: one Kineto JSON file per rank (`.json` or
// `.json.gz`, as torch.profiler's tensorboard_trace_handler writes them) into one partrain
// trace. Each file is read twice: a look at its metadata (which rank, how many), then one pass
// that spools its events to a temporary file while keeping aside what storing them needs (steps,
// thread names, the collectives' evidence); then the collectives are matched across ranks, the
// hosts' clocks aligned by them, and the spooled events stored on the run's timeline. Memory
// holds the summaries, never the events, so a file of any size imports in bounded memory.
#pragma once

#include "core/status.h"
#include "profiler/import/trace_import.h"

namespace partrain::profiler {

// Errors: kUnreadable (exit 3) naming the file for input that cannot be read (malformed JSON, a
// damaged or truncated gzip stream, JSON that is no Kineto trace, a malformed distributedInfo,
// several files without distributedInfo), world sizes that disagree, two files of one rank;
// kInvalidArgument (exit 2) for the output (exists without overwrite, live, a directory) or a
// step marker that does not compile; kFailed when the output cannot be written. A rank of the
// world with no file is no error: the trace says which ranks are absent. On any error nothing is
// left at the output path.
StatusOr<TraceImportSummary> import_kineto_traces(const TraceImportOptions& options);

// What `path` is when it is JSON torch writes beside its Kineto traces and not one of them: "an
// execution trace (...)", "a memory timeline (...)" (other_torch_json_name). Empty for anything
// else, a Kineto trace or a file the import refuses. An import of a directory passes over them.
std::string_view other_torch_json_of(const std::filesystem::path& path);

// Whether `path` looks like a Kineto trace by its name (.json, .json.gz, .pt.trace.json...).
bool has_kineto_file_name(const std::filesystem::path& path);

}  // namespace partrain::profiler
