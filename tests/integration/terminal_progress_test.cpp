// Long commands say how far they got on a terminal's stderr (analyze of a big trace, import of
// large traces, bench collectives) and nothing when stderr is not a terminal. The terminal is a
// pseudo-terminal from script(1); the same commands with stderr to a file write no progress.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using testing::run_partrain;
using testing::run_shell;

const fs::path kKineto = fs::path(PARTRAIN_SOURCE_DIR) / "tests/data/kineto";

// What a terminal of type `term` ("": TERM unset) shows of `args` (stdout to /dev/null):
// script(1) runs it on a pseudo-terminal and copies everything written to it.
std::string on_a_terminal(const std::string& args, const std::string& term = "xterm") {
  const std::string command = testing::partrain_binary() + " " + args + " >/dev/null";
  const std::string env = term.empty() ? "env -u TERM" : "env TERM=" + term;
  return run_shell(env + " script -qfec '" + command + "' /dev/null").out;
}

bool has_script() { return run_shell("command -v script").exit_code == 0; }

TEST(TerminalProgress, ImportAndAnalyzeSayHowFarOnATerminalOnly) {
  if (!has_script()) GTEST_SKIP() << "script(1) (util-linux) is not installed";
  testing::ScratchDir dir;
  const std::string trace = (dir.path() / "ddp.db").string();
  const std::string import_args = "import " + (kKineto / "ddp").string() + " -o " + trace;
  const std::string shown = on_a_terminal(import_args);
  EXPECT_NE(shown.find("\rpartrain: import: reading "), std::string::npos) << shown;
  EXPECT_NE(shown.find(" (4 of 4)\033[K"), std::string::npos) << shown;
  EXPECT_NE(shown.find("\r\033[K"), std::string::npos) << shown;  // cleared at the end
  // Not a terminal: the messages only.
  const auto piped = run_partrain(import_args + " --force");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_EQ(piped.err.find('\r'), std::string::npos) << piped.err;
  EXPECT_EQ(piped.err.find("reading "), std::string::npos) << piped.err;

  const std::string analyzed = on_a_terminal("analyze " + trace);
  EXPECT_NE(analyzed.find("\rpartrain: analyze: time per rank (1 of 7)\033[K"), std::string::npos)
      << analyzed;
  EXPECT_NE(analyzed.find("\rpartrain: analyze: top kernels (7 of 7)\033[K\r\033[K"),
            std::string::npos)
      << analyzed;
  // A terminal that shows escapes as text (TERM=dumb: an editor's shell buffer) or of no known
  // type gets no progress line: it read "^M...^[[K".
  for (const std::string term : {"dumb", ""}) {
    SCOPED_TRACE("TERM=" + term);
    const std::string plain = on_a_terminal("analyze " + trace, term);
    EXPECT_EQ(plain.find("\rpartrain: analyze:"), std::string::npos) << plain;
    EXPECT_EQ(plain.find('\033'), std::string::npos) << plain;
  }
  const auto analyze_piped = run_partrain("analyze " + trace);
  ASSERT_EQ(analyze_piped.exit_code, 0) << analyze_piped.err;
  EXPECT_EQ(analyze_piped.err.find('\r'), std::string::npos) << analyze_piped.err;
  EXPECT_EQ(analyze_piped.out.find('\r'), std::string::npos);
}

}  // namespace
}  // namespace partrain
