// The dashboard loop on a scripted terminal: keys in, frames out, the exit codes; and the
// one-shot outputs (--once, --json) on the fixture trace.
#include "tui/dashboard.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "profiler/sqlite_db.h"
#include "profiler/trace_writer.h"
#include "tests/support/scratch_dir.h"
#include "tests/unit/tui/tui_fixture.h"

namespace partrain::tui {
namespace {

class ScriptedTerminal final : public Terminal {
 public:
  ScriptedTerminal(TerminalSize size, std::deque<int> keys) : size_(size), keys_(std::move(keys)) {}
  TerminalSize size() override { return size_; }
  void draw(const ScreenGrid& grid) override {
    frames.push_back(grid.to_text(false, false));
    widths.push_back(grid.width());
  }
  int read_key(int) override {
    if (keys_.empty()) return 'q';
    const int key = keys_.front();
    keys_.pop_front();
    if (key == kKeyResize) size_ = {100, 30};
    return key;
  }
  std::vector<std::string> frames;
  std::vector<int> widths;

 private:
  TerminalSize size_;
  std::deque<int> keys_;
};

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto writer = profiler::TraceWriter::create(options_.trace = dir_.path() / "run.db");
    ASSERT_TRUE(writer.is_ok());
    (*writer)->append(testing::two_rank_run_start());
    (*writer)->append(testing::two_rank_step(1, 0));
    (*writer)->append(testing::two_rank_step(2, 100 * testing::kMs));
    ASSERT_TRUE((*writer)->set_run_status(profiler::RunStatus::kCompleted).is_ok());
    options_.charset = Charset::kAscii;
  }
  testing::ScratchDir dir_;
  DashboardOptions options_;
};

bool has(const std::string& frame, const std::string& text) {
  return frame.find(text) != std::string::npos;
}

TEST_F(DashboardTest, EachKeyRedrawsItsViewAndQQuits) {
  ScriptedTerminal terminal({80, 24}, {'2', '3', '4', '5', '?', 'x', kKeyResize, 'q'});
  StatusOr<int> code = run_dashboard_on(options_, terminal);
  ASSERT_TRUE(code.is_ok()) << code.status().message();
  EXPECT_EQ(*code, 0);
  ASSERT_GE(terminal.frames.size(), 7u);
  EXPECT_TRUE(has(terminal.frames[0], "Overview: 2 of 2 ranks"));
  EXPECT_TRUE(has(terminal.frames[0], "run run-tui | completed | step 2"));
  EXPECT_TRUE(has(terminal.frames[1], "Timeline:"));
  EXPECT_TRUE(has(terminal.frames[2], "Collectives: 2 recent matched"));
  EXPECT_TRUE(has(terminal.frames[3], "Memory: rank 0"));
  EXPECT_TRUE(has(terminal.frames[4], "Findings:"));
  EXPECT_TRUE(has(terminal.frames[5], "Keys"));  // the help overlay
  // The resize redraws at the new size.
  EXPECT_EQ(terminal.widths.back(), 100);
  EXPECT_EQ(terminal.widths.front(), 80);
}

TEST_F(DashboardTest, ATerminalSmallerThan80x24IsAUsageError) {
  ScriptedTerminal terminal({79, 24}, {});
  StatusOr<int> code = run_dashboard_on(options_, terminal);
  ASSERT_FALSE(code.is_ok());
  EXPECT_EQ(code.status().exit_code(), 2);
  EXPECT_NE(code.status().message().find("79x24"), std::string::npos);
}

TEST_F(DashboardTest, AMissingTraceIsUnreadable) {
  options_.trace = dir_.path() / "absent.db";
  ScriptedTerminal terminal({80, 24}, {});
  StatusOr<int> code = run_dashboard_on(options_, terminal);
  ASSERT_FALSE(code.is_ok());
  EXPECT_EQ(code.status().exit_code(), 3);
}

// A live writer holding `trace`'s lock, as TraceWriter::create holds it from before it makes the
// file until its process ends.
class HeldWriterLock {
 public:
  explicit HeldWriterLock(const std::filesystem::path& trace)
      : fd_(::open(profiler::writer_lock_path(trace).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(flock(fd_, LOCK_EX | LOCK_NB), 0);
  }
  ~HeldWriterLock() { ::close(fd_); }
  HeldWriterLock(const HeldWriterLock&) = delete;
  HeldWriterLock& operator=(const HeldWriterLock&) = delete;

 private:
  int fd_;
};

// `partrain top --json` right after a launch: the newest trace is an empty file whose writer is
// alive (its schema comes next). Before, that was exit 3, "not an SQLite database (it is
// empty)"; now --json and --once wait for the schema.
TEST_F(DashboardTest, OneShotOutputsWaitForATraceItsLiveWriterIsCreating) {
  const std::filesystem::path born = dir_.path() / "new.db";
  HeldWriterLock lock(born);
  std::ofstream(born).flush();  // empty, as the writer makes it before its schema
  std::thread writer([finished = options_.trace, born] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::filesystem::rename(finished, born);  // the schema and rows, at once
  });
  options_.trace = born;
  StatusOr<nlohmann::json> json = view_model_once(options_);
  writer.join();
  ASSERT_TRUE(json.is_ok()) << json.status().message();
  EXPECT_EQ((*json)["run_id"], "run-tui");
}

// A writer that never gets to its schema within the wait: the run is starting (exit 1), not an
// unreadable file (exit 3); an empty file nobody is writing stays unreadable.
TEST_F(DashboardTest, ATraceStillBeingCreatedIsNotUnreadable) {
  const std::filesystem::path born = dir_.path() / "new.db";
  std::ofstream(born).flush();
  options_.trace = born;
  options_.wait_for_starting_trace = std::chrono::milliseconds(200);
  StatusOr<std::string> abandoned = render_view_once(options_, 80, 24, false);
  ASSERT_FALSE(abandoned.is_ok());
  EXPECT_EQ(abandoned.status().exit_code(), 3) << abandoned.status().message();
  HeldWriterLock lock(born);
  StatusOr<std::string> text = render_view_once(options_, 80, 24, false);
  ASSERT_FALSE(text.is_ok());
  EXPECT_EQ(text.status().exit_code(), 1) << text.status().message();
  EXPECT_TRUE(has(text.status().message(), "being created")) << text.status().message();
  // A database whose schema the writer has not committed: no meta table yet.
  {
    auto db = profiler::SqliteDb::open(born.string(), SQLITE_OPEN_READWRITE);
    ASSERT_TRUE(db.is_ok());
    ASSERT_TRUE(db->exec("PRAGMA journal_mode = WAL; CREATE TABLE other (x)").is_ok());
  }
  StatusOr<nlohmann::json> json = view_model_once(options_);
  ASSERT_FALSE(json.is_ok());
  EXPECT_EQ(json.status().exit_code(), 1) << json.status().message();
}

TEST_F(DashboardTest, OnceRendersTheOverviewAt80Columns) {
  StatusOr<std::string> text = render_view_once(options_, 80, 24, false);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_TRUE(has(*text, "run run-tui | completed | step 2 | 0:00 | 20k tok/s (2 steps)"))
      << *text;
  // Each rank's tokens/s per GPU (2 x 1000 tokens in 2 steps of 100 ms), then 9 bar cells.
  EXPECT_TRUE(has(*text, "   0      2    100 ms    10k #####===.")) << *text;
  EXPECT_TRUE(has(*text, "   1      2    100 ms    10k #######=.")) << *text;
  EXPECT_TRUE(has(*text, "step time :: 100 ms (100 ms - 100 ms, last 2 steps)")) << *text;
  size_t lines = 0;
  for (size_t at = 0; (at = text->find('\n', at)) != std::string::npos; ++at) ++lines;
  // status, title and header, 2 ranks, blank, step time and loss, blank and legend
  EXPECT_EQ(lines, 1 + 2 + 2 + 6u);
}

// --once --view: the chosen view under the status line, filling the frame's size (at least 80x24).
TEST_F(DashboardTest, OnceRendersTheChosenViewInTheFrameSize) {
  const auto line_count = [](const std::string& text) {
    return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  };
  options_.view = View::kCollectives;
  StatusOr<std::string> text = render_view_once(options_, 100, 30, false);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_TRUE(has(*text, "run run-tui | completed | step 2")) << *text;
  EXPECT_TRUE(has(*text, "Collectives: 2 recent matched")) << *text;
  EXPECT_FALSE(has(*text, "Overview:")) << *text;
  EXPECT_EQ(line_count(*text), 30u);
  for (size_t at = 0, next; (next = text->find('\n', at)) != std::string::npos; at = next + 1) {
    EXPECT_LE(next - at, 100u);
  }
  options_.view = View::kFindings;
  text = render_view_once(options_, 40, 10, false);  // smaller than a dashboard: 80x24
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  EXPECT_TRUE(has(*text, "Findings:")) << *text;
  EXPECT_EQ(line_count(*text), 24u);
}

TEST_F(DashboardTest, JsonCarriesTheViewModel) {
  StatusOr<nlohmann::json> json = view_model_once(options_);
  ASSERT_TRUE(json.is_ok()) << json.status().message();
  EXPECT_EQ((*json)["run_id"], "run-tui");
  EXPECT_EQ((*json)["status"], "completed");
  EXPECT_EQ((*json)["step"], 2);
  ASSERT_EQ((*json)["ranks"].size(), 2u);
  const nlohmann::json& rank0 = (*json)["ranks"][0];
  EXPECT_DOUBLE_EQ(rank0["step_ms"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(rank0["last_step"]["compute_pct"].get<double>(), 60.0);
  EXPECT_DOUBLE_EQ(rank0["last_step"]["exposed_comm_pct"].get<double>(), 30.0);
  EXPECT_DOUBLE_EQ(rank0["collective"]["waited_ms"].get<double>(), 20.0);
  EXPECT_EQ(rank0["memory_bytes"], 6 * testing::kMiB);
  EXPECT_DOUBLE_EQ((*json)["recent_collectives"][0]["skew_ms"].get<double>(), 20.0);
  EXPECT_TRUE((*json)["analysis"]["available"].get<bool>());
}

TEST(UseColor, NoColorAndTheFlag) {
  ::setenv("TERM", "xterm-256color", 1);
  ::setenv("NO_COLOR", "1", 1);
  EXPECT_FALSE(use_color(ColorMode::kAuto, true));
  EXPECT_TRUE(use_color(ColorMode::kAlways, false));
  ::unsetenv("NO_COLOR");
  EXPECT_TRUE(use_color(ColorMode::kAuto, true));
  EXPECT_FALSE(use_color(ColorMode::kAuto, false));
  EXPECT_FALSE(use_color(ColorMode::kNever, true));
}

// A dumb terminal shows escape sequences as text: auto gives it none, as NO_COLOR does; nor to
// one whose TERM is unset.
TEST(UseColor, DumbTerminalGetsNoColourUnlessAsked) {
  ::unsetenv("NO_COLOR");
  ::setenv("TERM", "dumb", 1);
  EXPECT_FALSE(use_color(ColorMode::kAuto, true));
  EXPECT_TRUE(use_color(ColorMode::kAlways, true));
  ::unsetenv("TERM");  // a terminal of no known type, as the progress line takes it (env.h)
  EXPECT_FALSE(use_color(ColorMode::kAuto, true));
  ::setenv("TERM", "xterm-256color", 1);
  EXPECT_TRUE(use_color(ColorMode::kAuto, true));
}

}  // namespace
}  // namespace partrain::tui
