#include "profiler/import/import_output.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/support/scratch_dir.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

// An importer that throws half-way through writing (a bug, as the std::out_of_range of a
// pipeline's trace was) ends as a Status, exit 1, naming what was thrown, and its temporary
// trace, write-ahead log, disk reserve and writer's mark are gone: no abort (exit 134) leaving
// `out.db.import-PID.tmp*` behind.
TEST(ImportOutput, AnImporterThatThrowsFailsWithAStatusAndLeavesNothingBehind) {
  ScratchDir dir;
  const fs::path out = dir.path() / "out.db";
  bool wrote = false;
  auto summary = import_or_status("Kineto traces", [&]() -> StatusOr<TraceImportSummary> {
    ASSIGN_OR_RETURN(std::unique_ptr<ImportOutput> output, ImportOutput::create(out, false));
    output->writer().append(StatEvent{"import_test", -1, 1, StatSeverity::kInfo, "a row"});
    wrote = !files_in(dir.path()).empty();
    throw std::out_of_range("map::at");
  });
  ASSERT_TRUE(wrote);
  ASSERT_FALSE(summary.is_ok());
  EXPECT_EQ(summary.status().exit_code(), 1);
  EXPECT_EQ(summary.status().message(),
            "importing the Kineto traces stopped on an internal error (map::at): nothing was "
            "written; please report it with the traces");
  EXPECT_EQ(files_in(dir.path()), std::vector<std::string>{});
}

}  // namespace
}  // namespace partrain::profiler
