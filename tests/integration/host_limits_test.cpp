// partrain on a hostile host. A process limit that refuses threads: the traced program runs as
// it would untraced, the trace saying what was lost, and the launcher fails with a message and
// exit 1, not std::terminate (the limit is played by a preloaded pthread_create that fails with
// EAGAIN, tests/support/refuse_threads: RLIMIT_NPROC does not bind root). A file-size limit,
// which is a full disk, not a signal; standard descriptors closed at the start.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "tests/integration/command_runner.h"
#include "tests/support/trace_query.h"

namespace partrain {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_partrain;
using testing::TraceQuery;

class HostLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           fmt::format("host_limits_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // `partrain args` where `who` (ranks, all) cannot start threads; `env`: more variables.
  CommandResult run_refusing_threads(const std::string& who, const std::string& args,
                                     const std::string& env = "") {
    return run_partrain(args,
                        fmt::format("cd {} && PARTRAIN_TEST_REFUSE_THREADS={} LD_PRELOAD={} {}",
                                    dir_.string(), who, REFUSE_THREADS_LIBRARY, env));
  }
  // The partrain binary run under a file-size limit of `kib` KiB: prlimit (util-linux), as the
  // shell's ulimit -f counts KiB in bash and 512-byte blocks in dash.
  static std::string limited(int kib) {
    return fmt::format("prlimit --fsize={} {}", kib * 1024, testing::partrain_binary());
  }
  fs::path dir_;
};

TEST_F(HostLimitsTest, TracedProgramRunsWhenTheInjectionLibraryGetsNoThreads) {
  const fs::path trace = dir_ / "w.db";
  CommandResult r = run_refusing_threads(
      "ranks", fmt::format("launch -n 2 --trace {} -- sh -c 'echo hi $RANK'", trace.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hi 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hi 1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("the host refused a new thread"), std::string::npos) << r.err;
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT rank, severity FROM stats WHERE name = 'exit_flush_unavailable' "
                   "ORDER BY rank"),
            "0|data_loss\n1|data_loss\n");
}

// The launcher loads no OpenBLAS, whose pool, when the library was linked, started before main
// and exited the process (`OpenBLAS blas_thread_init: pthread_create failed`) where the host
// refused its threads: the launcher's own message instead.
TEST_F(HostLimitsTest, LauncherWithoutThreadsFailsWithAMessage) {
  CommandResult r = run_refusing_threads("all", "launch -n 2 --no-trace -- true");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot start the rendezvous store"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ulimit -u"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
}

// Under an address-space limit (ulimit -v) the launcher hung in fork() before its first rank:
// OpenBLAS, linked, started its pool before main, a pool thread retried its buffer's mmap for
// ever and fork()'s atfork handler joined it. The launcher opens no OpenBLAS now. 320 MiB hung
// the launcher on 2 cores (300-360 MiB did, 3 in 3; hosts with more cores hang at more) and is
// ~90 MiB above what it needs with the CUDA libraries mapped.
TEST_F(HostLimitsTest, LaunchUnderAnAddressSpaceLimitRuns) {
  CommandResult r = testing::run_shell(
      fmt::format("cd {} && timeout -s KILL 60 prlimit --as={} {} launch -n 2 --no-trace -- sh -c "
                  "'echo hi $RANK'",
                  dir_.string(), 320 << 20, testing::partrain_binary()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hi 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hi 1"), std::string::npos) << r.out;
}

// Only a process that runs GEMMs opens OpenBLAS: the launcher of a command has none mapped
// (its rank reads the launcher's maps), and `partrain --version` opens it to say which it is.
TEST_F(HostLimitsTest, OnlyProcessesThatRunGemmsOpenOpenBlas) {
  CommandResult r = testing::run_partrain(
      "launch -n 1 --no-trace --no-prefix -- sh -c "
      "'test \"$(cat /proc/$PPID/comm)\" = partrain && grep -c libopenblas /proc/$PPID/maps'");
  EXPECT_EQ(r.out, "0\n") << r.err;
  r = testing::run_partrain("--version");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("libopenblas.so.0)"), std::string::npos) << r.out;
}

// Started with stdin, stdout and stderr closed (a cron job, `>&- 2>&- <&-`): the rendezvous
// socket took descriptor 1, the ranks' output went into it and the launcher died of SIGPIPE
// (141, the trace `killed`).
TEST_F(HostLimitsTest, ClosedStandardDescriptorsLeaveTheRunAlone) {
  const fs::path trace = dir_ / "c.db";
  CommandResult r = testing::run_shell(
      fmt::format("{} launch -n 2 --workload gpt --layers 1 --hidden 32 --heads 2 --seq 8 "
                  "--vocab 64 --steps 3 --trace {} >&- 2>&- <&-",
                  testing::partrain_binary(), trace.string()));
  EXPECT_EQ(r.exit_code, 0);
  TraceQuery q(trace);
  EXPECT_EQ(q.rows("SELECT status FROM runs"), "completed\n");
}

// Under a file-size limit (ulimit -f) a write past it fails with EFBIG, taken as a full disk:
// the trace stops, the run goes on and leaves nothing beside the trace; export fails with a
// message and no temporary file. SIGXFSZ killed them without a word (exit 153). The ranks keep
// the signal's default disposition.
TEST_F(HostLimitsTest, AFileSizeLimitIsAFullDiskNotASignal) {
  const fs::path trace = dir_ / "f.db";
  CommandResult r =
      testing::run_shell(fmt::format("cd {} && {} launch -n 2 --workload mlp --steps 20 --trace {}",
                                     dir_.string(), limited(384), trace.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("files are limited to 384.00 KiB here (ulimit -f)"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(trace.string() + "-reserve"));
  EXPECT_FALSE(fs::exists(trace.string() + "-writer"));
  {
    TraceQuery q(trace);
    EXPECT_EQ(q.rows("SELECT status FROM runs"), "completed\n");
  }
  r = testing::run_shell(fmt::format("cd {} && {} export --format chrome {} -o ex.json",
                                     dir_.string(), limited(16), trace.string()));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("writing ex.json failed: File too large"), std::string::npos) << r.err;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    const std::string name = entry.path().filename().string();
    EXPECT_TRUE(name.rfind("f.db", 0) == 0) << "left behind: " << name;
  }

  // A rank's SIGXFSZ is the default again (SigIgn bit 25 clear), as it is without partrain.
  r = testing::run_shell(
      fmt::format("{} launch -n 1 --no-trace --no-prefix -- sh -c 'grep SigIgn /proc/self/status'",
                  limited(384)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t at = r.out.find("SigIgn:");
  ASSERT_NE(at, std::string::npos) << r.out;
  const uint64_t ignored = std::stoull(r.out.substr(at + 7), nullptr, 16);
  EXPECT_EQ(ignored & (uint64_t{1} << (SIGXFSZ - 1)), 0u) << r.out;
}

// A soft limit on open files lowered in the user's shell (ulimit -Sn 32, the hard limit high):
// the launcher of 4 traced ranks raises its own soft limit to the hard one instead of running
// out of descriptors, and gives the ranks the soft limit it was started with, as torchrun would.
TEST_F(HostLimitsTest, ALowSoftLimitOnOpenFilesIsTheLaunchersToRaiseNotTheRanks) {
  const fs::path trace = dir_ / "n.db";
  CommandResult r = run_partrain(
      fmt::format("launch -n 4 --trace {} -- sh -c 'echo limit $(ulimit -Sn)'", trace.string()),
      fmt::format("cd {} && prlimit --nofile=32:4096 --", dir_.string()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(r.out.find(fmt::format("[rank {}] limit 32", rank)), std::string::npos) << r.out;
  }
  EXPECT_EQ(TraceQuery(trace).rows("SELECT status FROM runs"), "completed\n");
}

}  // namespace
}  // namespace partrain
