// `partrain top` end to end, as a new user would meet it: a 4-rank run in the background and the
// dashboard on its live trace inside a tmux session (80x24): rank rows that move, every view's
// header on its key, a redraw at a new size, and q leaving the terminal as it was. Skipped where
// tmux is not installed. Waits poll for what they expect (no timed assertions).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/integration/command_runner.h"
#include "tests/support/scratch_dir.h"
#include "tui/screen_grid.h"

namespace partrain::testing {
namespace {

// `command` as one argument of the shell run_shell starts: single-quoted, so that $? in it is the
// command's own and not the outer shell's.
std::string single_quoted(const std::string& command) {
  std::string quoted = "'";
  for (char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr auto kPatience = 60s;  // for a busy 2-core machine

bool eventually(const std::function<bool()>& condition, std::chrono::seconds limit = kPatience) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(200ms);
  }
  return condition();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  for (size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
    lines.push_back(text.substr(begin, end - begin));
  }
  return lines;
}

// The overview's rank rows: a right-aligned rank number in the first four columns, then the
// step (or "-"); the view tabs (" 1 Overview") do not match.
std::vector<std::string> rank_rows(const std::string& screen) {
  static const std::regex row("^ {1,3}[0-9]+ +([0-9]+|-) .*");
  std::vector<std::string> rows;
  for (const std::string& line : lines_of(screen)) {
    if (std::regex_match(line, row)) rows.push_back(line);
  }
  return rows;
}

class TopInTmux : public ::testing::Test {
 protected:
  void SetUp() override {
    if (run_shell("tmux -V").exit_code != 0) GTEST_SKIP() << "tmux is not installed";
    socket_ = fmt::format("partrain-top-test-{}", getpid());
    trace_ = dir_.path() / "run.db";
    // A run far longer than the test; setsid makes it a process group we can stop as a whole.
    const std::string launch = fmt::format(
        "cd {} && setsid {} -q launch -n 4 --workload gpt --layers 2 --hidden 64 --heads 4 "
        "--seq 32 --vocab 128 --dp 2 --tp 2 --steps 100000 --trace {} >launch.log 2>&1 & "
        "echo $! > {}/launch.pid",
        dir_.path().string(), PARTRAIN_BINARY, trace_.string(), dir_.path().string());
    ASSERT_EQ(std::system(launch.c_str()), 0);
    // Live: all four ranks have finished a step (the JSON view model says so).
    ASSERT_TRUE(eventually([&] {
      const CommandResult top = run_partrain("-q top " + trace_.string() + " --json");
      if (top.exit_code != 0) return false;
      const auto json = nlohmann::json::parse(top.out, nullptr, false);
      return !json.is_discarded() && json["live"] == true && json["ranks"].size() == 4 &&
             json["step"].is_number();
    })) << read_file((dir_.path() / "launch.log").string());
  }

  void TearDown() override {
    if (!socket_.empty()) run_shell(tmux("kill-server"));
    const std::string pid = read_file((dir_.path() / "launch.pid").string());
    if (!pid.empty()) {
      ::kill(-std::stoi(pid), SIGTERM);
      eventually([&] { return ::kill(-std::stoi(pid), 0) != 0; }, 20s);
      ::kill(-std::stoi(pid), SIGKILL);
    }
  }

  std::string tmux(const std::string& args) const { return "tmux -u -L " + socket_ + " " + args; }
  std::string capture() const { return run_shell(tmux("capture-pane -p -t top")).out; }
  bool screen_has(const std::string& text) const {
    return eventually([&] { return capture().find(text) != std::string::npos; }, 30s);
  }
  void press(const std::string& key) const { run_shell(tmux("send-keys -t top " + key)); }

  ScratchDir dir_;
  std::string socket_;
  fs::path trace_;
};

TEST_F(TopInTmux, ShowsALiveRunAndQuitsCleanly) {
  const std::string code_file = (dir_.path() / "top.exit").string();
  // The shell prints a line before and after, so the restored screen can be recognised.
  const std::string session = fmt::format(
      "echo before-top; {} top {}; echo $? > {}; echo after-top; sleep 120", PARTRAIN_BINARY,
      trace_.string(), code_file);
  ASSERT_EQ(run_shell(tmux(fmt::format("-f /dev/null new-session -d -s top -x 80 -y 24 {}",
                                       single_quoted(session))))
                .exit_code,
            0);
  ASSERT_TRUE(screen_has("Overview: 4 of 4 ranks")) << capture();

  // Four rank rows, and they move while the run goes on.
  const std::vector<std::string> first = rank_rows(capture());
  ASSERT_EQ(first.size(), 4u) << capture();
  EXPECT_TRUE(eventually([&] {
    const std::vector<std::string> now = rank_rows(capture());
    return now.size() == 4 && now != first;
  })) << capture();

  for (const auto& [key, header] : std::vector<std::pair<std::string, std::string>>{
           {"2", "Timeline:"}, {"3", "Collectives:"}, {"4", "Memory: rank"}, {"5", "Findings:"},
           {"1", "Overview:"}}) {
    press(key);
    EXPECT_TRUE(screen_has(header)) << "key " << key << ":\n" << capture();
  }

  // A resize redraws at the new width: the header's last column ends near column 100.
  ASSERT_EQ(run_shell(tmux("resize-window -t top -x 100 -y 30")).exit_code, 0);
  EXPECT_TRUE(eventually([&] {
    for (const std::string& line : lines_of(capture())) {
      if (line.find("waited") != std::string::npos && line.size() > 90) return true;
    }
    return false;
  }, 30s)) << capture();

  press("q");
  ASSERT_TRUE(eventually([&] { return !read_file(code_file).empty(); }, 30s)) << capture();
  EXPECT_EQ(read_file(code_file), "0\n");
  // The alternate screen is gone: the shell's lines are back, the dashboard is not.
  ASSERT_TRUE(screen_has("after-top")) << capture();
  const std::string restored = capture();
  EXPECT_NE(restored.find("before-top"), std::string::npos) << restored;
  EXPECT_EQ(restored.find("Overview:"), std::string::npos) << restored;
  EXPECT_EQ(run_shell(tmux("display-message -p -t top '#{alternate_on}'")).out, "0\n");
}

// What issue 37 found missing or wrong on this screen: per-rank tokens/s, step time and loss
// over steps, the memory chart's time axis, `l` choosing the next rank on its first press, and
// the help box's corners.
TEST_F(TopInTmux, ShowsHistoryRatesTheMemoryAxisAndAHelpBoxWithCorners) {
  const std::string session = fmt::format("{} top {}; sleep 120", PARTRAIN_BINARY,
                                          trace_.string());
  ASSERT_EQ(run_shell(tmux(fmt::format("-f /dev/null new-session -d -s top -x 80 -y 24 {}",
                                       single_quoted(session))))
                .exit_code,
            0);
  ASSERT_TRUE(screen_has("Overview: 4 of 4 ranks")) << capture();
  EXPECT_TRUE(screen_has(" tok/s (")) << capture();  // the status line says what it covers
  EXPECT_TRUE(screen_has("step time  tok/s")) << capture();
  // Sparklines once a step is in the history: a level glyph right after the label.
  static const std::regex history("step time [▁▂▃▄▅▆▇█]+ [0-9.]+ m?s \\(");
  EXPECT_TRUE(eventually([&] { return std::regex_search(capture(), history); }, 30s))
      << capture();
  EXPECT_TRUE(std::regex_search(capture(), std::regex("loss      [▁▂▃▄▅▆▇█]+ [0-9.]+")))
      << capture();

  press("4");
  ASSERT_TRUE(screen_has("Memory: rank 0 ")) << capture();
  EXPECT_TRUE(screen_has("elapsed  └")) << capture();
  press("l");  // the first press moves on
  EXPECT_TRUE(screen_has("Memory: rank 1 ")) << capture();

  press("?");
  EXPECT_TRUE(screen_has("┌──")) << capture();
  EXPECT_TRUE(screen_has("──┘")) << capture();
  EXPECT_EQ(capture().find("│──"), std::string::npos) << capture();
  press("q");
}

TEST(TopCommand, OnceAndJsonOnAFinishedRun) {
  ScratchDir dir;
  const fs::path trace = dir.path() / "run.db";
  const CommandResult launch = run_partrain(fmt::format(
      "-q launch -n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
      "--dp 2 --tp 2 --steps 4 --trace {}",
      trace.string()));
  ASSERT_EQ(launch.exit_code, 0) << launch.err;
  const CommandResult once = run_partrain("top " + trace.string() + " --once");
  ASSERT_EQ(once.exit_code, 0) << once.err;
  EXPECT_NE(once.out.find("| completed | step 3 |"), std::string::npos) << once.out;
  EXPECT_EQ(rank_rows(once.out).size(), 4u) << once.out;
  for (const std::string& line : lines_of(once.out)) EXPECT_LE(tui::decode_utf8(line).size(), 80u) << line;
  EXPECT_EQ(once.out.find("\x1b["), std::string::npos);  // not a terminal: no colour
  // Another view, in the size the shell exports (not a terminal).
  const CommandResult view = run_shell(fmt::format(
      "COLUMNS=120 LINES=40 {} top {} --once --view collectives", PARTRAIN_BINARY, trace.string()));
  ASSERT_EQ(view.exit_code, 0) << view.err;
  EXPECT_NE(view.out.find("Collectives: "), std::string::npos) << view.out;
  EXPECT_EQ(view.out.find("Overview: "), std::string::npos) << view.out;
  EXPECT_EQ(lines_of(view.out).size(), 40u) << view.out;

  const CommandResult json = run_partrain("top " + trace.string() + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json model = parse_json_output(json.out);
  EXPECT_EQ(model["status"], "completed");
  EXPECT_EQ(model["ranks"].size(), 4u);
  EXPECT_GT(model["ranks"][0]["step_ms"].get<double>(), 0);
  EXPECT_FALSE(model["recent_collectives"].empty());
  // Each rank exited with code 0 and no signal: the trace's 0 for "none" is not a signal 0.
  for (const nlohmann::json& rank : model["ranks"]) {
    EXPECT_EQ(rank["exit_code"], 0) << rank.dump();
    EXPECT_TRUE(rank["exit_signal"].is_null()) << rank.dump();
  }

  // Without a name: the most recently written trace in ./partrain-runs.
  fs::create_directories(dir.path() / "partrain-runs");
  std::ofstream(dir.path() / "partrain-runs" / "older.db") << "not a trace";
  fs::last_write_time(dir.path() / "partrain-runs" / "older.db",
                      fs::file_time_type::clock::now() - std::chrono::hours(1));
  fs::copy_file(trace, dir.path() / "partrain-runs" / "newest.db");
  const CommandResult latest =
      run_shell(fmt::format("cd {} && {} top --once", dir.path().string(), PARTRAIN_BINARY));
  ASSERT_EQ(latest.exit_code, 0) << latest.err;
  EXPECT_NE(latest.err.find("showing partrain-runs/newest.db"), std::string::npos) << latest.err;
  EXPECT_EQ(rank_rows(latest.out).size(), 4u) << latest.out;

  // Colour on request, even into a pipe; NO_COLOR only matters when auto.
  EXPECT_NE(run_partrain("top " + trace.string() + " --once --color=always").out.find("\x1b["),
            std::string::npos);
}

// A `partrain launch --tui` command in a detached tmux session on a server of its own, gone
// with it.
class TuiSession {
 public:
  explicit TuiSession(std::string_view name)
      : socket_(fmt::format("partrain-launch-tui-{}-{}", name, getpid())) {}
  ~TuiSession() { tmux("kill-server"); }
  CommandResult tmux(const std::string& args) const {
    return run_shell("tmux -u -L " + socket_ + " " + args);
  }
  bool start(const std::string& command, int width, int height) const {
    return tmux(fmt::format("-f /dev/null new-session -d -s tui -x {} -y {} {}", width, height,
                            single_quoted(command)))
               .exit_code == 0;
  }
  std::string capture() const { return tmux("capture-pane -p -t tui").out; }
  void press(const std::string& key) const { tmux("send-keys -t tui " + key); }

 private:
  std::string socket_;
};

// A terminal that cannot move its cursor (TERM=dumb) is refused with a way out, not drawn as a
// screen of blanks.
TEST(TopCommand, ATerminalThatCannotMoveItsCursorIsRefused) {
  if (run_shell("tmux -V").exit_code != 0) GTEST_SKIP() << "tmux is not installed";
  ScratchDir dir;
  const fs::path trace = dir.path() / "run.db";
  ASSERT_EQ(run_partrain(fmt::format("-q launch -n 2 --workload mlp --layers 2 --hidden 32 "
                                     "--steps 3 --trace {}",
                                     trace.string()))
                .exit_code,
            0);
  TuiSession tui("dumb");
  const fs::path out = dir.path() / "out";
  ASSERT_TRUE(tui.start(fmt::format("TERM=dumb {} top {} 2> {}; echo $? >> {}; sleep 60",
                                    PARTRAIN_BINARY, trace.string(), out.string(), out.string()),
                        80, 24));
  EXPECT_TRUE(eventually([&] {
    return read_file(out.string()).find("\n2\n") != std::string::npos;
  })) << read_file(out.string())
      << tui.capture();
  EXPECT_NE(read_file(out.string()).find("cannot move its cursor (TERM=dumb)"), std::string::npos)
      << read_file(out.string());
}

// `partrain launch --tui`: the dashboard follows the run it launched, stays for browsing once the
// run has ended, and q returns the run's exit code with the launcher's messages replayed.
TEST(LaunchTui, FollowsItsRunAndReturnsItsExitCode) {
  if (run_shell("tmux -V").exit_code != 0) GTEST_SKIP() << "tmux is not installed";
  ScratchDir dir;
  TuiSession tui("follows");
  const auto capture = [&] { return tui.capture(); };
  const fs::path trace = dir.path() / "tui.db";
  const fs::path code_file = dir.path() / "code";
  const std::string command = fmt::format(
      "{} launch -n 4 --workload mlp --layers 2 --hidden 32 --steps 40 --tui --trace {}; "
      "echo $? > {}; sleep 60",
      PARTRAIN_BINARY, trace.string(), code_file.string());
  ASSERT_TRUE(tui.start(command, 80, 24));
  // The run ends by itself (40 steps) and the dashboard stays on it, showing every rank.
  EXPECT_TRUE(eventually([&] {
    const std::string screen = capture();
    return screen.find("| completed |") != std::string::npos && rank_rows(screen).size() == 4;
  })) << capture();
  EXPECT_TRUE(read_file(code_file.string()).empty());  // still browsing
  tui.press("q");
  EXPECT_TRUE(eventually([&] { return !read_file(code_file.string()).empty(); }, 30s)) << capture();
  EXPECT_EQ(read_file(code_file.string()), "0\n");
  const std::string after = capture();
  EXPECT_NE(after.find("partrain: trace: " + trace.string()), std::string::npos) << after;
  EXPECT_NE(after.find("rank output: " + (dir.path() / "tui.logs").string()), std::string::npos)
      << after;
  EXPECT_TRUE(fs::exists(dir.path() / "tui.logs" / "rank_3.log"));
}

// The dashboard of `launch --tui` shows what `partrain top` shows on the same trace: tokens/s
// counted once per replica (it read 2x with tp 2: the run's config had not arrived when the
// dashboard opened the trace) and the memory estimate. After q the run's summary is on the
// terminal, not only in rank 0's log.
TEST(LaunchTui, AgreesWithTopAndPrintsTheSummaryAfterQ) {
  if (run_shell("tmux -V").exit_code != 0) GTEST_SKIP() << "tmux is not installed";
  ScratchDir dir;
  TuiSession tui("summary");
  const auto capture = [&] { return tui.capture(); };
  const fs::path trace = dir.path() / "tui.db";
  const fs::path code_file = dir.path() / "code";
  const std::string command = fmt::format(
      "{} launch -n 4 --workload gpt --layers 2 --hidden 64 --heads 4 --seq 32 --vocab 128 "
      "--dp 2 --tp 2 --steps 30 --tui --trace {}; echo $? > {}; sleep 60",
      PARTRAIN_BINARY, trace.string(), code_file.string());
  ASSERT_TRUE(tui.start(command, 100, 30));
  ASSERT_TRUE(eventually([&] {
    const std::string screen = capture();
    return screen.find("| completed |") != std::string::npos && rank_rows(screen).size() == 4;
  })) << capture();

  // The same figure `partrain top --json` computes from the finished trace, as the status line
  // prints it.
  const nlohmann::json model =
      parse_json_output(run_partrain("-q top " + trace.string() + " --json").out);
  ASSERT_TRUE(model["tokens_per_s"].is_number()) << model.dump();
  const double tokens_per_s = model["tokens_per_s"].get<double>();
  const std::string rate = tokens_per_s >= 1e4   ? fmt::format("{:.0f}k", tokens_per_s / 1e3)
                           : tokens_per_s >= 1e3 ? fmt::format("{:.1f}k", tokens_per_s / 1e3)
                                                 : fmt::format("{:.0f}", tokens_per_s);
  const std::string expected = fmt::format("| {} tok/s ({} steps)", rate,
                                           model["tokens_per_s_steps"].get<int>());
  EXPECT_TRUE(eventually([&] { return capture().find(expected) != std::string::npos; }, 30s))
      << expected << "\n" << capture();
  ASSERT_TRUE(model["ranks"][0]["memory_estimate_bytes"].is_number()) << model.dump();
  tui.press("4");
  EXPECT_TRUE(eventually([&] { return capture().find(", estimate ") != std::string::npos; }, 30s))
      << capture();

  tui.press("q");
  ASSERT_TRUE(eventually([&] { return !read_file(code_file.string()).empty(); }, 30s)) << capture();
  EXPECT_EQ(read_file(code_file.string()), "0\n");
  const std::string after = capture();
  EXPECT_NE(after.find("throughput: "), std::string::npos) << after;
  EXPECT_NE(after.find("memory peak per rank"), std::string::npos) << after;
}

// A user's program under `launch --tui`: its last lines, not all of them, and where the rest is.
TEST(LaunchTui, AProgramsLastLinesAfterQ) {
  if (run_shell("tmux -V").exit_code != 0) GTEST_SKIP() << "tmux is not installed";
  ScratchDir dir;
  TuiSession tui("tail");
  const auto capture = [&] { return tui.capture(); };
  const fs::path code_file = dir.path() / "code";
  const std::string command = fmt::format(
      "{} launch -n 2 --tui --trace {} -- sh -c 'seq 101 150'; echo $? > {}; sleep 60",
      PARTRAIN_BINARY, (dir.path() / "u.db").string(), code_file.string());
  ASSERT_TRUE(tui.start(command, 100, 40));
  ASSERT_TRUE(eventually([&] { return capture().find("| completed |") != std::string::npos; }))
      << capture();
  tui.press("q");
  ASSERT_TRUE(eventually([&] { return !read_file(code_file.string()).empty(); }, 30s)) << capture();
  const std::string after = capture();
  EXPECT_NE(after.find("rank 0's last 20 lines (all 50 in " +
                       (dir.path() / "u.logs" / "rank_0.log").string() + "):\n131\n"),
            std::string::npos)
      << after;
  EXPECT_NE(after.find("\n150\n"), std::string::npos) << after;
  EXPECT_EQ(after.find("\n130\n"), std::string::npos) << after;
}

TEST(LaunchTui, RefusesWithoutATerminalOrATrace) {
  ScratchDir dir;
  const CommandResult piped = run_partrain(fmt::format(
      "launch -n 2 --workload mlp --steps 1 --tui --trace {} </dev/null >/dev/null",
      (dir.path() / "x.db").string()));
  EXPECT_EQ(piped.exit_code, 2) << piped.err;
  EXPECT_NE(piped.err.find("--tui needs a terminal"), std::string::npos) << piped.err;
  EXPECT_FALSE(fs::exists(dir.path() / "x.db"));  // nothing was launched
  const CommandResult json = run_partrain(fmt::format(
      "launch -n 2 --workload mlp --steps 1 --tui --json --trace {}", (dir.path() / "y.db").string()));
  EXPECT_EQ(json.exit_code, 2) << json.err;
  EXPECT_NE(json.err.find("--tui and --json"), std::string::npos) << json.err;
  EXPECT_FALSE(fs::exists(dir.path() / "y.db"));
}

TEST(TopCommand, ExitCodes) {
  ScratchDir dir;
  const fs::path bogus = dir.path() / "notes.db";
  std::ofstream(bogus) << "not a trace";
  EXPECT_EQ(run_partrain("top " + bogus.string() + " --once").exit_code, 3);
  EXPECT_EQ(run_partrain("top " + bogus.string() + " --interval 10ms --once").exit_code, 2);
  // A value that is no duration names the flag (it said only "'1,5': unknown duration unit").
  const CommandResult comma = run_partrain("top " + bogus.string() + " --interval 1,5 --once");
  EXPECT_EQ(comma.exit_code, 2);
  EXPECT_NE(comma.err.find("--interval: '1,5': write a decimal point, not a comma (1.5)"),
            std::string::npos)
      << comma.err;
  EXPECT_EQ(run_partrain("top " + bogus.string() + " --view graphs --once").exit_code, 2);
  // Not a terminal: a usage error that points at --once.
  const CommandResult no_tty = run_partrain("top " + bogus.string() + " </dev/null");
  EXPECT_EQ(no_tty.exit_code, 2) << no_tty.err;
  EXPECT_NE(no_tty.err.find("needs a terminal"), std::string::npos) << no_tty.err;
  const CommandResult none = run_shell(fmt::format("cd {} && {} top --once", dir.path().string(),
                                                   PARTRAIN_BINARY));
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no trace named"), std::string::npos) << none.err;
}

}  // namespace
}  // namespace partrain::testing
