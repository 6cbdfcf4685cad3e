#include "runner/launch/output_relay.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/file_size_limit.h"

namespace partrain::launch {
namespace {

// A relay writing "terminal" output into two temporary files.
class RelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = std::tmpfile();
    err_ = std::tmpfile();
  }
  void TearDown() override {
    std::fclose(out_);
    std::fclose(err_);
  }
  RelayOptions options() {
    RelayOptions o;
    o.terminal_stdout = fileno(out_);
    o.terminal_stderr = fileno(err_);
    return o;
  }
  static std::string contents(FILE* file) {
    std::string text;
    std::rewind(file);
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
    return text;
  }
  FILE* out_ = nullptr;
  FILE* err_ = nullptr;
};

TEST_F(RelayTest, PrefixesCompleteLinesAndBuffersPartialOnes) {
  auto relay = OutputRelay::open(options(), {4, 5});
  ASSERT_TRUE(relay.is_ok());
  relay->feed(0, Stream::kStdout, "hel");
  relay->feed(1, Stream::kStdout, "other\n");
  relay->feed(0, Stream::kStdout, "lo\nwor");
  relay->feed(0, Stream::kStderr, "oops\n");
  relay->finish(0, Stream::kStdout);
  EXPECT_EQ(contents(out_), "[rank 5] other\n[rank 4] hello\n[rank 4] wor\n");
  EXPECT_EQ(contents(err_), "[rank 4] oops\n");
}

// A progress bar redraws its line with carriage returns (tqdm writes "\r" and the new state, then
// waits for the next step) and ends it with a newline: each state goes out when written,
// prefixed, the cursor back at the line's start where the next one writes its rank; not the
// whole bar at once when it is done, nor each state one step late. A CRLF is a newline, also
// split between two reads; a redraw is no line of the failure summary's tail.
TEST_F(RelayTest, CarriageReturnsGoOutAsTheyComeAndCrlfIsANewline) {
  auto relay = OutputRelay::open(options(), {0});
  ASSERT_TRUE(relay.is_ok());
  relay->feed(0, Stream::kStderr, "\r 0%|");
  EXPECT_EQ(contents(err_), "[rank 0]  0%|\r");
  relay->feed(0, Stream::kStderr, "\r50%|##");
  EXPECT_EQ(contents(err_), "[rank 0]  0%|\r[rank 0] 50%|##\r");
  relay->feed(0, Stream::kStderr, "\r100%|####\n");
  EXPECT_EQ(contents(err_), "[rank 0]  0%|\r[rank 0] 50%|##\r[rank 0] 100%|####\n");
  // After the bar's newline, a partial line waits for its end again.
  relay->feed(0, Stream::kStderr, "next");
  EXPECT_EQ(contents(err_), "[rank 0]  0%|\r[rank 0] 50%|##\r[rank 0] 100%|####\n");
  relay->feed(0, Stream::kStdout, "dos\r");
  EXPECT_EQ(contents(out_), "");  // a CR at a read's end: a CRLF's half, perhaps
  relay->feed(0, Stream::kStdout, "\nline\r\n");
  EXPECT_EQ(contents(out_), "[rank 0] dos\r\n[rank 0] line\r\n");
  std::deque<std::string> tail{"100%|####"};
  EXPECT_EQ(relay->stderr_tail(0), tail);
}

// A bar's state shown at the end of a read is the line so far: what comes after it in later reads
// is written after it again, over itself. tqdm's closing newline arrives on its own, and had come
// out as an empty "[rank 0] " line (and a state's rest, "2", over the state's start).
TEST_F(RelayTest, TheRestOfAShownRedrawContinuesItsLine) {
  auto relay = OutputRelay::open(options(), {0});
  ASSERT_TRUE(relay.is_ok());
  relay->feed(0, Stream::kStderr, "\rprogress 1/");
  relay->feed(0, Stream::kStderr, "2");
  EXPECT_EQ(contents(err_), "[rank 0] progress 1/\r[rank 0] progress 1/2\r");
  relay->feed(0, Stream::kStderr, "\rprogress 2/2");
  relay->feed(0, Stream::kStderr, "\n");
  EXPECT_EQ(contents(err_),
            "[rank 0] progress 1/\r[rank 0] progress 1/2\r[rank 0] progress 2/2\r"
            "[rank 0] progress 2/2\n");
  relay->feed(0, Stream::kStderr, "after\n");  // a line of its own again
  EXPECT_NE(contents(err_).find("\n[rank 0] after\n"), std::string::npos) << contents(err_);
  std::deque<std::string> tail{"progress 2/2", "after"};
  EXPECT_EQ(relay->stderr_tail(0), tail);
}

TEST_F(RelayTest, NoPrefixWhenSwitchedOff) {
  RelayOptions o = options();
  o.prefix = false;
  auto relay = OutputRelay::open(o, {0});
  ASSERT_TRUE(relay.is_ok());
  relay->feed(0, Stream::kStdout, "plain\n");
  EXPECT_EQ(contents(out_), "plain\n");
}

TEST_F(RelayTest, KeepsTheLastStderrLines) {
  RelayOptions o = options();
  o.tail_lines = 3;
  auto relay = OutputRelay::open(o, {0});
  ASSERT_TRUE(relay.is_ok());
  for (int i = 0; i < 10; ++i) relay->feed(0, Stream::kStderr, fmt::format("line {}\n", i));
  relay->feed(0, Stream::kStdout, "stdout is not kept\n");
  std::deque<std::string> expected{"line 7", "line 8", "line 9"};
  EXPECT_EQ(relay->stderr_tail(0), expected);
}

TEST_F(RelayTest, PartialLinesStayBounded) {
  RelayOptions o = options();
  o.prefix = false;
  o.max_line_bytes = 4;
  auto relay = OutputRelay::open(o, {0});
  ASSERT_TRUE(relay.is_ok());
  relay->feed(0, Stream::kStdout, "abc");
  relay->feed(0, Stream::kStdout, "defg");  // pending reached the bound: out it goes
  relay->feed(0, Stream::kStdout, "hi\n");
  // Without prefixes the bytes go out as written: no newline where the piece was cut.
  EXPECT_EQ(contents(out_), "abcdefghi\n");
}

// A line longer than the bound goes out in pieces, still one line: the next piece continues it
// without a prefix (a 1 MB JSON log line came out as 16 prefixed lines). Another rank's line ends
// the open one first; its rest then starts a line of its own.
TEST_F(RelayTest, ALongLineStaysOneLineUnderItsPrefix) {
  RelayOptions o = options();
  o.max_line_bytes = 4;
  auto relay = OutputRelay::open(o, {4, 5});
  ASSERT_TRUE(relay.is_ok());
  relay->feed(0, Stream::kStdout, "abc");
  relay->feed(0, Stream::kStdout, "defg");
  relay->feed(0, Stream::kStdout, "hi\n");
  EXPECT_EQ(contents(out_), "[rank 4] abcdefghi\n");
  relay->feed(0, Stream::kStdout, "jklmn");
  relay->feed(1, Stream::kStdout, "other\n");
  relay->feed(0, Stream::kStdout, "op\n");
  EXPECT_EQ(contents(out_), "[rank 4] abcdefghi\n[rank 4] jklmn\n[rank 5] other\n[rank 4] op\n");
}

// A partial line nothing follows (a prompt: input()'s, pdb's "(Pdb) ") goes out once the stream
// has been quiet for quiet_piece_after, not when the user has already answered it; the rest of
// the line continues it.
TEST_F(RelayTest, AQuietPartialLineIsShownAndItsRestContinuesIt) {
  auto relay = OutputRelay::open(options(), {0});
  ASSERT_TRUE(relay.is_ok());
  const auto start = std::chrono::steady_clock::now();
  relay->feed(0, Stream::kStdout, "(Pdb) ");
  relay->show_quiet_pieces(start);  // not quiet yet: the line may still be coming
  EXPECT_EQ(contents(out_), "");
  relay->show_quiet_pieces(start + std::chrono::seconds(1));
  EXPECT_EQ(contents(out_), "[rank 0] (Pdb) ");
  relay->feed(0, Stream::kStdout, "42\nnext\n");
  EXPECT_EQ(contents(out_), "[rank 0] (Pdb) 42\n[rank 0] next\n");
}

// A worker's output byte for byte where no prefix is added (the terminal with --no-prefix, and
// --log-dir's files): a stream that does not end with a newline gets none (a binary written to
// stdout came out one byte longer). With prefixes, a last partial line still ends its line.
TEST_F(RelayTest, WithoutPrefixesTheBytesAreTheWorkers) {
  const std::string dir = ::testing::TempDir() + "/relay_exact_" + std::to_string(::getpid());
  RelayOptions o = options();
  o.prefix = false;
  o.log_dir = dir;
  o.tee = true;
  auto relay = OutputRelay::open(o, {0});
  ASSERT_TRUE(relay.is_ok()) << relay.status().message();
  relay->feed(0, Stream::kStdout, std::string_view("bin\0ary\nno newline at the end", 29));
  relay->feed(0, Stream::kStdout, "\r10%\r20%\r");
  relay->finish(0, Stream::kStdout);
  EXPECT_EQ(contents(out_), std::string("bin\0ary\nno newline at the end\r10%\r20%\r", 38));
  std::ifstream file(dir + "/rank_0.log");
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str(), std::string("bin\0ary\nno newline at the end\r10%\r20%\r", 38));
  std::filesystem::remove_all(dir);
}

TEST_F(RelayTest, LogDirWritesOneFilePerRankAndTeeAlsoPrints) {
  std::string dir = ::testing::TempDir() + "/relay_logs_" + std::to_string(::getpid());
  for (bool tee : {false, true}) {
    RelayOptions o = options();
    o.log_dir = dir;
    o.tee = tee;
    auto relay = OutputRelay::open(o, {0, 1});
    ASSERT_TRUE(relay.is_ok()) << relay.status().message();
    relay->feed(1, Stream::kStdout, "to the file\n");
    relay->feed(1, Stream::kStderr, "an error\n");
    std::ifstream file(dir + "/rank_1.log");
    std::stringstream text;
    text << file.rdbuf();
    EXPECT_EQ(text.str(), "to the file\nan error\n");
    EXPECT_TRUE(std::filesystem::exists(dir + "/rank_0.log"));
  }
  // Only the tee round reached the terminal.
  EXPECT_EQ(contents(out_), "[rank 1] to the file\n");
  EXPECT_EQ(contents(err_), "[rank 1] an error\n");
  std::filesystem::remove_all(dir);
}

// A rank log the disk cannot take (a full disk; here the file-size limit, which fails the same
// way and needs no root, with SIGXFSZ ignored as partrain does): the rank's output goes on to the
// terminal, the log's path and errno are said once, and the lines it lost are counted.
TEST(RelayLogFull, OutputGoesOnToTheTerminalAndTheLossIsCounted) {
  const std::string dir = ::testing::TempDir() + "/relay_full_" + std::to_string(::getpid());
  int terminal[2];
  ASSERT_EQ(::pipe(terminal), 0);
  RelayOptions o;
  o.terminal_stdout = terminal[1];
  o.terminal_stderr = terminal[1];
  o.log_dir = dir;
  auto relay = OutputRelay::open(o, {1});
  ASSERT_TRUE(relay.is_ok()) << relay.status().message();
  testing::LimitedRun run = testing::run_with_file_size_limit(16, [&] {
    relay->feed(0, Stream::kStdout, "in the log\n");
    relay->feed(0, Stream::kStdout, "too much for it\n");
    relay->feed(0, Stream::kStderr, "and this\n");
    relay->finish(0, Stream::kStdout);
    for (const std::string& loss : relay->log_losses()) std::fprintf(stderr, "%s\n", loss.c_str());
    return 0;
  });
  ::close(terminal[1]);
  char shown[256] = {};
  EXPECT_GT(::read(terminal[0], shown, sizeof shown - 1), 0);
  ::close(terminal[0]);
  EXPECT_EQ(std::string(shown), "[rank 1] too much for it\n[rank 1] and this\n");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(
      run.err.find("rank 1's log " + dir +
                   "/rank_1.log: File too large: its output goes to the terminal from here on"),
      std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("rank 1's log " + dir + "/rank_1.log lost 2 lines (25 B): File too large"),
            std::string::npos)
      << run.err;
  std::ifstream file(dir + "/rank_1.log");
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(text.str().rfind("in the log\n", 0), 0u) << text.str();
  std::filesystem::remove_all(dir);
}

// A run's logs go into a directory of their own, never over another run's: a --run-id given
// again gets <id>.2, .3.
TEST(RunLogDir, EachRunGetsANewDirectoryNamedByItsId) {
  const std::string root =
      ::testing::TempDir() + "/run_logs_" + std::to_string(::getpid()) + "/nested";
  auto first = new_run_log_dir(root, "abc123");
  ASSERT_TRUE(first.is_ok()) << first.status().message();
  EXPECT_EQ(*first, root + "/abc123");
  EXPECT_TRUE(std::filesystem::is_directory(*first));
  auto again = new_run_log_dir(root, "abc123");
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(*again, root + "/abc123.2");
  EXPECT_EQ(*new_run_log_dir(root, "abc123"), root + "/abc123.3");
  EXPECT_EQ(*new_run_log_dir(root, "other"), root + "/other");
  // Nodes of one run sharing the directory: node N's beside node 0's, named as its trace file,
  // not taken for a reused id (node 1 had got abc123.4 here, node 2 .5, in whatever order).
  EXPECT_EQ(*new_run_log_dir(root, "multi", 1), root + "/multi.node1");
  EXPECT_EQ(*new_run_log_dir(root, "multi", 0), root + "/multi");
  EXPECT_EQ(*new_run_log_dir(root, "multi", 2), root + "/multi.node2");
  // A root that cannot be a directory: said, with the path.
  const std::string file = root + "/a-file";
  std::ofstream(file) << "x";
  auto refused = new_run_log_dir(file, "abc123");
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find(file), std::string::npos) << refused.status().message();
  std::filesystem::remove_all(::testing::TempDir() + "/run_logs_" + std::to_string(::getpid()));
}

}  // namespace
}  // namespace partrain::launch
