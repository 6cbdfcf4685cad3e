// The files partrain makes beside a path it was given (a trace's disk reserve and writer lock,
// an export's temporary) or in the temporary directory (a --json run's summary, the collector's
// socket directory) never write through a symbolic link planted at their name, in a directory
// others can write to; a temporary directory that cannot be used, or a run id that makes the
// socket's path too long for a Unix socket, does not break the run. Each test runs the real binary.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"

namespace partrain::testing {
namespace {
namespace fs = std::filesystem;

constexpr const char* kMlp = "--workload mlp --steps 1";
constexpr const char* kVictimText = "precious\n";

class CompanionFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    victim_ = dir_ / "victim.txt";
    std::ofstream(victim_) << kVictimText;
  }

  // A symbolic link at `at` to the victim file, as another user could plant it.
  void plant_link(const fs::path& at) const { fs::create_symlink(victim_, at); }

  ScratchDir scratch_;
  const fs::path& dir_ = scratch_.path();
  fs::path victim_;
};

// A link planted at the trace's disk reserve (its target was overwritten with the reserve's
// 4 MiB of zeros) or at its writer lock (truncated to "host pid"): the victim is untouched, the
// link is not removed, and the launch says which file is in the way.
TEST_F(CompanionFilesTest, ATraceNeverWritesThroughALinkAtItsReserveOrWriterLock) {
  for (const char* suffix : {"-reserve", "-writer"}) {
    const fs::path trace = dir_ / fmt::format("run{}.db", suffix);
    const std::string planted = trace.string() + suffix;
    plant_link(planted);
    CommandResult r =
        run_partrain(fmt::format("-q launch -n 1 {} --trace {}", kMlp, trace.string()));
    EXPECT_EQ(read_file(victim_.string()), kVictimText) << suffix;
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(planted))) << suffix;
    EXPECT_NE(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(planted + " is a symbolic link"), std::string::npos) << r.err;
  }
}

// A leftover reserve and lock of our own (a writer killed before its trace was made) are
// regular files of this user: replaced, and the run traces.
TEST_F(CompanionFilesTest, OurOwnLeftoverCompanionFilesAreReplaced) {
  const fs::path trace = dir_ / "run.db";
  std::ofstream(trace.string() + "-reserve") << "old";
  std::ofstream(trace.string() + "-writer") << "host 1\n";
  CommandResult r = run_partrain(fmt::format("-q launch -n 1 {} --trace {}", kMlp, trace.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(trace));
  EXPECT_FALSE(fs::exists(trace.string() + "-reserve"));
  EXPECT_FALSE(fs::exists(trace.string() + "-writer"));
}

// export -o writes a temporary file beside the output: one planted at the name it would have
// taken (`sh -c` execs partrain, so its $$ is the export's pid) is left alone, and the export
// writes.
TEST_F(CompanionFilesTest, ExportNeverWritesThroughALinkAtItsTemporaryName) {
  const fs::path trace = dir_ / "run.db";
  ASSERT_EQ(
      run_partrain(fmt::format("-q launch -n 1 {} --trace {}", kMlp, trace.string())).exit_code, 0);
  const fs::path out = dir_ / "trace.json";
  CommandResult r = run_shell(fmt::format(
      "sh -c 'cd {} && ln -s {} .trace.json.partrain-tmp-$$ && exec {} export {} -o {}'",
      dir_.string(), victim_.string(), partrain_binary(), trace.string(), out.string()));
  EXPECT_EQ(read_file(victim_.string()), kVictimText);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(out.string()).substr(0, 1), "{");
  // The export's own file is made as any new file is: the umask's mode, not a private 0600.
  struct stat info {};
  ASSERT_EQ(::stat(out.c_str(), &info), 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(info.st_mode & 0777, 0666 & ~mask);
}

// launch --json had the rank write its summary to $TMPDIR/partrain-summary-<launcher pid>.json,
// a name anyone could plant a link at; the launcher then crashed removing it.
TEST_F(CompanionFilesTest, LaunchJsonNeverWritesThroughALinkInTheTemporaryDirectory) {
  const fs::path temp = dir_ / "tmp";
  fs::create_directory(temp);
  CommandResult r = run_shell(fmt::format(
      "TMPDIR={} sh -c 'ln -s {} $TMPDIR/partrain-summary-$$.json && exec {} -q launch -n 1 {} "
      "--no-trace --json'",
      temp.string(), victim_.string(), partrain_binary(), kMlp));
  EXPECT_EQ(read_file(victim_.string()), kVictimText);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json summary = parse_json_output(r.out);
  EXPECT_TRUE(summary.contains("losses")) << r.out;
}

// A TMPDIR that does not exist, or one this user cannot write into, is passed over for /tmp as
// Python's tempfile does: the run's summary is printed (it crashed, or printed nothing).
TEST_F(CompanionFilesTest, AnUnusableTmpdirFallsBackToTmp) {
  const fs::path readonly = dir_ / "readonly";
  fs::create_directory(readonly);
  fs::permissions(readonly, fs::perms::owner_read | fs::perms::owner_exec);
  for (const std::string tmpdir : {(dir_ / "absent").string(), readonly.string()}) {
    if (tmpdir == readonly.string() && ::access(readonly.c_str(), W_OK) == 0) continue;  // root
    CommandResult r =
        run_partrain(fmt::format("-q launch -n 1 {} --no-trace --json", kMlp), "TMPDIR=" + tmpdir);
    ASSERT_EQ(r.exit_code, 0) << tmpdir << ": " << r.err;
    nlohmann::json summary = parse_json_output(r.out);
    EXPECT_TRUE(summary.contains("losses")) << tmpdir << ": " << r.out;
  }
}

// Every run id check_run_id accepts (up to 200 characters) traces, whatever the length of the
// collector's socket path it makes: a Unix socket's path has at most 107 bytes.
TEST_F(CompanionFilesTest, ALongRunIdStillTraces) {
  const fs::path trace = dir_ / "run.db";
  const std::string run_id(200, 'r');
  CommandResult r = run_partrain(
      fmt::format("-q launch -n 1 {} --run-id {} --trace {}", kMlp, run_id, trace.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(trace));
  EXPECT_EQ(r.err.find("107"), std::string::npos) << r.err;
}

// The same for a long XDG_RUNTIME_DIR: the socket goes into a private directory elsewhere.
TEST_F(CompanionFilesTest, ALongRuntimeDirStillTraces) {
  fs::path runtime = dir_ / std::string(90, 'x');
  fs::create_directory(runtime);
  fs::permissions(runtime, fs::perms::owner_all);
  const fs::path trace = dir_ / "run.db";
  CommandResult r =
      run_partrain(fmt::format("-q launch -n 1 {} --run-id r1 --trace {}", kMlp, trace.string()),
                   "XDG_RUNTIME_DIR=" + runtime.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(trace));
}

}  // namespace
}  // namespace partrain::testing
