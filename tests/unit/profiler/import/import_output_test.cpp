#include "profiler/import/import_output.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
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

// A Ctrl-C (SIGINT) or SIGTERM while an import writes removes its temporary files and ends the
// import by that signal (the shell's 130 / 143); before, they stayed beside the output.
TEST(ImportOutput, AnImportStoppedBySignalLeavesNothingBehind) {
  for (int signal_number : {SIGINT, SIGTERM}) {
    ScratchDir dir;
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto output = ImportOutput::create(dir.path() / "out.db", false);
      if (!output.is_ok()) _exit(3);
      (*output)->writer().append(StatEvent{"import_test", -1, 1, StatSeverity::kInfo, "a row"});
      if (files_in(dir.path()).empty()) _exit(4);
      raise(signal_number);
      _exit(5);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), signal_number);
    EXPECT_EQ(files_in(dir.path()), std::vector<std::string>{}) << signal_number;
  }
}

// What a SIGKILLed import or merge left beside the output is removed by the next one; a
// temporary whose process still runs (pid 1), another output's, and other files stay.
TEST(ImportOutput, AKilledImportsLeftoversAreRemovedByTheNext) {
  ScratchDir dir;
  const pid_t gone = fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) _exit(0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  auto touch = [&](const std::string& name) { std::ofstream(dir.path() / name) << "x"; };
  for (const char* suffix : {"", "-wal", "-shm", "-writer", "-reserve"}) {
    touch(fmt::format("out.db.import-{}.tmp{}", gone, suffix));
  }
  touch(fmt::format("out.db.merge-{}.tmp", gone));
  touch("out.db.import-1.tmp");
  touch(fmt::format("other.db.import-{}.tmp", gone));
  touch(fmt::format("out.db.import-{}.tmpfile-of-mine", gone));
  touch("notes.txt");

  auto output = ImportOutput::create(dir.path() / "out.db", false);
  ASSERT_TRUE(output.is_ok()) << output.status().message();
  output->reset();
  std::vector<std::string> left = files_in(dir.path());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left,
            (std::vector<std::string>{
                "notes.txt", "other.db.import-" + std::to_string(gone) + ".tmp",
                "out.db.import-1.tmp", fmt::format("out.db.import-{}.tmpfile-of-mine", gone)}));
}

}  // namespace
}  // namespace partrain::profiler
