#include "runner/launch/failure_summary.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace partrain::launch {
namespace {

RankFailure killed_rank() {
  RankFailure f;
  f.rank = 3;
  f.node_rank = 1;
  f.host = "a12";
  f.pid = 4411;
  f.status = ExitStatus{true, SIGKILL};
  f.elapsed = std::chrono::milliseconds(1500);
  f.stderr_tail = {"step 7", "allocating 4 GiB"};
  return f;
}

TEST(SignalNames, NamesAndDescriptions) {
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(describe_exit(ExitStatus{true, 9}), "signal 9 (SIGKILL)");
  EXPECT_EQ(describe_exit(ExitStatus{false, 3}), "exit code 3");
}

TEST(ExitStatus, ShellConvention) {
  EXPECT_EQ((ExitStatus{true, SIGKILL}).exit_code(), 137);
  EXPECT_EQ((ExitStatus{true, SIGINT}).exit_code(), 130);
  EXPECT_EQ((ExitStatus{false, 3}).exit_code(), 3);
  EXPECT_TRUE((ExitStatus{false, 0}).success());
  EXPECT_FALSE((ExitStatus{true, 0}).success());
}

TEST(FailureSummary, NamesRankHostPidSignalTimeAndStderr) {
  std::string text = format_failure_summary(killed_rank(), false);
  EXPECT_NE(text.find("rank 3 (node 1, host a12, pid 4411) failed first with signal 9 (SIGKILL) "
                      "after 1.5 s"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("OOM killer"), std::string::npos) << text;
  EXPECT_NE(text.find("    step 7\n    allocating 4 GiB\n"), std::string::npos) << text;
  EXPECT_NE(text.find("exiting with 137 (128 + signal 9)"), std::string::npos) << text;
  EXPECT_EQ(text.find("another node"), std::string::npos);
  EXPECT_NE(format_failure_summary(killed_rank(), true).find("on another node"),
            std::string::npos);
}

TEST(FailureSummary, ExitCodeOfTheRank) {
  RankFailure f = killed_rank();
  f.status = ExitStatus{false, 3};
  f.stderr_tail.clear();
  EXPECT_EQ(f.exit_code(), 3);
  std::string text = format_failure_summary(f, false);
  EXPECT_NE(text.find("failed first with exit code 3"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 3 wrote nothing on stderr"), std::string::npos) << text;
  EXPECT_EQ(text.find("hint"), std::string::npos) << text;
}

TEST(FailureRecord, RoundTripsThroughTheStoreEncoding) {
  RankFailure f = killed_rank();
  auto decoded = decode_failure(encode_failure(f));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  EXPECT_EQ(decoded->rank, 3);
  EXPECT_EQ(decoded->node_rank, 1);
  EXPECT_EQ(decoded->host, "a12");
  EXPECT_EQ(decoded->pid, 4411);
  EXPECT_TRUE(decoded->status.signaled);
  EXPECT_EQ(decoded->status.value, SIGKILL);
  EXPECT_EQ(decoded->elapsed, f.elapsed);
  EXPECT_EQ(decoded->stderr_tail, f.stderr_tail);
  EXPECT_FALSE(decode_failure("3\nnot a record\n").is_ok());
}

}  // namespace
}  // namespace partrain::launch
