#include "runner/launch/failure_summary.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

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

// A rank's flight dump said its signal came after its program had ended: the hint says so and
// points at the shutdown race, instead of guessing from the signal.
TEST(FailureSummary, ASignalAfterTheProgramEndedIsSaid) {
  RankFailure f = killed_rank();
  f.status = ExitStatus{true, SIGABRT};
  const std::string text = format_failure_summary(f, false, true);
  EXPECT_NE(text.find("partrain: hint: rank 3's program had ended (its Python atexit handlers "
                      "had run): the signal came in the interpreter's shutdown"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("a failed assertion"), std::string::npos) << text;
  EXPECT_NE(format_failure_summary(f, false).find("a failed assertion"), std::string::npos);
  f.status = ExitStatus{false, 1};  // an exit code is the program's own, whenever it came
  EXPECT_EQ(format_failure_summary(f, false, true).find("hint"), std::string::npos);
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

// Node 1 of 4 ranks each, lost 12 s into the run.
RankFailure lost_node(std::string why) {
  RankFailure lost;
  lost.rank = 4;
  lost.node_rank = 1;
  lost.host = "b07";
  lost.pid = 777;
  lost.status = ExitStatus{false, 1};
  lost.elapsed = std::chrono::seconds(12);
  lost.node_lost = std::move(why);
  lost.ranks_lost = 4;
  return lost;
}

TEST(FailureRecord, ANodeLossAndARecordedExceptionRoundTrip) {
  RankFailure lost = lost_node("no heartbeat for 3.2 s\n(its host froze)");
  lost.error_report = {"ValueError: boom", "  File \"train.py\", line 3"};
  auto decoded = decode_failure(encode_failure(lost));
  ASSERT_TRUE(decoded.is_ok()) << decoded.status().message();
  EXPECT_EQ(decoded->node_lost, "no heartbeat for 3.2 s (its host froze)") << "one line";
  EXPECT_EQ(decoded->ranks_lost, 4);
  EXPECT_EQ(decoded->error_report, lost.error_report);
  EXPECT_TRUE(decoded->stderr_tail.empty());
  // A report longer than the record says is refused, not read past its end.
  EXPECT_FALSE(decode_failure("1\n0\nh\n2\n0\n1\n5\n0\n\n99\nonly one\n").is_ok());
}

TEST(FailureSummary, ALostNodeIsNamedWithItsRanks) {
  const std::string text = format_failure_summary(lost_node("no heartbeat for 3.0 s"), true);
  EXPECT_NE(text.find("node 1 (host b07, launcher pid 777) was lost after 12 s: no heartbeat "
                      "for 3.0 s"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("its ranks 4-7 are counted as lost"), std::string::npos) << text;
  EXPECT_NE(text.find("exiting with 1"), std::string::npos) << text;
}

TEST(FailureSummary, ARecordedExceptionComesBeforeTheStderrTail) {
  RankFailure f = killed_rank();
  f.status = ExitStatus{false, 1};
  f.error_report = {"ValueError: rank 3 is unhappy", "  File \"train.py\", line 9, in main",
                    "ValueError: rank 3 is unhappy"};
  const std::string text = format_failure_summary(f, false);
  EXPECT_NE(text.find("rank 3 raised ValueError: rank 3 is unhappy (recorded in its error file "
                      "by torch's @record)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    File \"train.py\", line 9, in main\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("allocating 4 GiB"), std::string::npos) << text;
}

class ErrorFileTest : public ::testing::Test {
 protected:
  // One file per test and process: ctest -j runs this file's tests at the same time.
  void SetUp() override {
    path_ = fmt::format("{}/error_file_test.{}.{}.json", ::testing::TempDir(),
                        ::testing::UnitTest::GetInstance()->current_test_info()->name(), getpid());
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void write(const std::string& text) {
    std::ofstream out(path_);
    out << text;
  }
  std::string path_;
};

// The layout torch's ErrorHandler.record_exception writes.
TEST_F(ErrorFileTest, TorchsRecordIsReadAsTorchrunReadsIt) {
  std::string stack = "Traceback (most recent call last):\n";
  for (int i = 0; i < 20; ++i) stack += fmt::format("  File \"f.py\", line {}, in g\n", i);
  stack += "ValueError: boom\n";
  nlohmann::json record = {{"message",
                            {{"message", "ValueError: boom"},
                             {"extraInfo", {{"py_callstack", stack}, {"timestamp", "17"}}}}}};
  write(record.dump());
  const std::vector<std::string> report = read_error_file(path_);
  ASSERT_EQ(report.size(), 13u) << "the message and the traceback's last 12 lines";
  EXPECT_EQ(report.front(), "ValueError: boom");
  EXPECT_EQ(report.back(), "ValueError: boom");
  EXPECT_EQ(report[1], "  File \"f.py\", line 9, in g");
}

TEST_F(ErrorFileTest, APlainMessageMissingOrBrokenFiles) {
  write(R"({"message": "SignalException: got SIGTERM", "timestamp": 3})");
  EXPECT_EQ(read_error_file(path_), std::vector<std::string>{"SignalException: got SIGTERM"});
  write("{not json");
  EXPECT_TRUE(read_error_file(path_).empty());
  write(R"({"message": {"extraInfo": 5}})");
  EXPECT_TRUE(read_error_file(path_).empty());
  EXPECT_TRUE(read_error_file(path_ + ".absent").empty());
}

}  // namespace
}  // namespace partrain::launch
