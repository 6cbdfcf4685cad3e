#include "profiler/import/import_output.h"

#include <fcntl.h>

#include "core/output_path.h"
#include "profiler/trace_output.h"

namespace partrain::profiler {
namespace fs = std::filesystem;

StatusOr<std::unique_ptr<ImportOutput>> ImportOutput::create(const fs::path& given_output,
                                                             bool overwrite) {
  const fs::path output = follow_links(given_output);
  RETURN_IF_ERROR(check_trace_output(output, overwrite, "imported trace"));
  std::unique_ptr<ImportOutput> out(new ImportOutput());
  out->output_ = output;
  out->directory_ = fs::absolute(output).parent_path();
  out->temporary_.emplace(output, "import");
  TraceWriterOptions options;
  options.overwrite = true;
  auto writer = TraceWriter::create(out->temporary_->path(), options);
  if (!writer.is_ok()) {
    return failed("cannot create {}: {}", out->temporary_->path().string(),
                  writer.status().message());
  }
  out->writer_ = std::move(writer).value();
  return out;
}

ImportOutput::~ImportOutput() = default;

Status ImportOutput::finish(int64_t end_ns) {
  RETURN_IF_ERROR(writer_->set_run_status(RunStatus::kCompleted, std::nullopt, end_ns));
  if (writer_->write_errors() > 0 || !writer_->stop_reason().empty()) {
    return failed("writing {} failed: {}", temporary_->path().string(),
                  writer_->stop_reason().empty()
                      ? fmt::format("{} events could not be stored", writer_->write_errors())
                      : writer_->stop_reason());
  }
  writer_.reset();  // commits, builds the indexes, settles the file into one
  RETURN_IF_ERROR(sync_path(temporary_->path(), O_RDONLY));
  RETURN_IF_ERROR(rename_trace_into_place(temporary_->path(), output_));
  temporary_->keep();
  return Status::ok();
}

StatusOr<TraceImportSummary> import_or_status(
    std::string_view source, const std::function<StatusOr<TraceImportSummary>()>& import) {
  try {
    return import();
  } catch (const std::exception& e) {
    return failed(
        "importing the {} stopped on an internal error ({}): nothing was written; please report "
        "it with the traces",
        source, e.what());
  }
}

}  // namespace partrain::profiler
