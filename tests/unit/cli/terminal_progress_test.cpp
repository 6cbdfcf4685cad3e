// Progress lines: drawn in place on a terminal and cleared at the end, nothing written anywhere
// else (a pipe or a log file must read as if there were no progress at all).
#include "cli/terminal_progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace partrain::cli {
namespace {

std::string read_back(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) text += static_cast<char>(c);
  return text;
}

TEST(TerminalProgress, NothingWhenNotATerminal) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    TerminalProgress progress("analyze", file);  // a regular file is not a terminal
    progress.update("time per rank", 1, 5);
    progress.update("top kernels", 5, 5);
    progress.update("anything");
  }
  EXPECT_EQ(read_back(file), "");
  std::fclose(file);
}

TEST(TerminalProgress, OneLineRedrawnInPlaceThenCleared) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    TerminalProgress progress("bench collectives", file, true);
    progress.update("all_reduce 8 B measured", 1, 3);
    // Within a tenth of a second of the last: skipped, unless it is the last step.
    progress.update("all_reduce 16 B measured", 2, 3);
    progress.update("all_reduce 32 B measured", 3, 3);
  }
  EXPECT_EQ(read_back(file),
            "\rpartrain: bench collectives: all_reduce 8 B measured (1 of 3)\033[K"
            "\rpartrain: bench collectives: all_reduce 32 B measured (3 of 3)\033[K"
            "\r\033[K");
  std::fclose(file);
}

TEST(TerminalProgress, FinishClearsOnlyWhatWasDrawn) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  TerminalProgress progress("import", file, true);
  progress.finish();
  EXPECT_EQ(read_back(file), "");
  progress.update("reading rank0.json", 1, 2);
  progress.finish();
  progress.finish();
  EXPECT_EQ(read_back(file), "\rpartrain: import: reading rank0.json (1 of 2)\033[K\r\033[K");
  std::fclose(file);
}

}  // namespace
}  // namespace partrain::cli
