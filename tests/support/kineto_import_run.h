// Importing Kineto files in the import tests: the options as `partrain import` sets them, and the
// committed fixtures of tests/data/kineto (real torch 2.15 traces, make_fixtures.py).
#pragma once

#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profiler/import/kineto_import.h"

namespace partrain::testing {

inline StatusOr<profiler::TraceImportSummary> import_kineto(
    std::vector<std::filesystem::path> inputs, const std::filesystem::path& output,
    std::string step_marker = {}) {
  profiler::TraceImportOptions options;
  options.inputs = std::move(inputs);
  options.output = output;
  options.step_marker = std::move(step_marker);
  options.command_line = "partrain import test";
  return profiler::import_kineto_traces(options);
}

// The four ranks' files of the committed job `job` (ddp, two_groups, pipeline, rooted).
inline std::vector<std::filesystem::path> kineto_fixture_files(std::string_view job) {
  std::vector<std::filesystem::path> files;
  for (int r = 0; r < 4; ++r) {
    files.push_back(std::filesystem::path(PARTRAIN_SOURCE_DIR) / "tests/data/kineto" / job /
                    fmt::format("rank{}.pt.trace.json.gz", r));
  }
  return files;
}

}  // namespace partrain::testing
