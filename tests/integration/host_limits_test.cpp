// partrain on a hostile host. A process limit that refuses threads: the traced program runs as
// it would untraced, the trace saying what was lost, and the launcher fails with a message and
// exit 1, not std::terminate (the limit is played by a preloaded pthread_create that fails with
// EAGAIN, tests/support/refuse_threads: RLIMIT_NPROC does not bind root).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

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

// OpenBLAS's pool, started when the binary loads, gets no threads either: one thread of BLAS
// starts none (OpenBLAS exits the process when its pool cannot start).
TEST_F(HostLimitsTest, LauncherWithoutThreadsFailsWithAMessage) {
  CommandResult r =
      run_refusing_threads("all", "launch -n 2 --no-trace -- true", "OPENBLAS_NUM_THREADS=1");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot start the rendezvous store"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ulimit -u"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace partrain
