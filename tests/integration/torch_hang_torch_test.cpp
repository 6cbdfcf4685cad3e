// A PyTorch job's hang diagnosed from partrain's own records of its collectives, whatever torch's
// own timeout (gloo's is 30 minutes, with no abort): 4 gloo ranks of a DDP-like loop
// (tests/integration/scripts/torch_hang.py) in which one rank sleeps in Python before a step's
// first all_reduce, under `partrain launch` and under `partrain trace -- torchrun`, with
// --collective-timeout 3s. The others' watchdogs fire (exit 124), the hung rank dumps when its
// launcher stops it, and the diagnosis names it and the all_reduce it never entered. Labelled
// `torch`; SKIPPED with one line without a torch interpreter (tests/support/torch_python.h).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <regex>
#include <string>
#include <thread>

#include "core/rank_list.h"
#include "tests/integration/command_runner.h"
#include "tests/integration/launched_process.h"
#include "tests/integration/torch_scenarios.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/torch_python.h"
#include "tests/support/trace_query.h"

namespace partrain::testing {
namespace {

const std::string kHangScript = (kScenarioScripts / "torch_hang.py").string();

int64_t monotonic_now_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// When the hung rank started sleeping (CLOCK_MONOTONIC, as the script prints it).
std::optional<int64_t> hang_started_ns(const std::string& out) {
  std::smatch match;
  static const std::regex line("hangs before step [0-9]+'s all_reduce at monotonic ([0-9]+) ns");
  if (!std::regex_search(out, match, line)) return std::nullopt;
  return std::stoll(match[1].str());
}

// What both launchers must say: the culprit, the all_reduce it never entered (each step
// all_reduces the model's 2 gradients, so step S's first is seq 2S), who waits on it.
void expect_culprit_named(const CommandResult& run, int rank, int step) {
  const std::string waiting = rank == 1 ? "0,2,3" : "0,1,3";
  const int seq = 2 * step;
  EXPECT_EQ(run.exit_code, 124) << run.err;
  // Which of the waiting ranks' watchdogs fire before the launcher stops the rest is a race (on
  // a loaded host one's exit can fail another's all_reduce first: "...fired on ranks 0,2; a
  // collective failed on rank 3"); the hung rank's never does: it has nothing in flight.
  std::smatch fired;
  static const std::regex fired_line("the collective watchdog fired on ranks? ([0-9,-]+)[;\n]");
  ASSERT_TRUE(std::regex_search(run.err, fired, fired_line)) << run.err;
  const StatusOr<std::vector<int>> fired_ranks = parse_rank_list(fired[1].str());
  ASSERT_TRUE(fired_ranks.is_ok()) << fired[1].str();
  EXPECT_EQ(std::count(fired_ranks->begin(), fired_ranks->end(), rank), 0) << fired[1].str();
  EXPECT_NE(run.err.find(fmt::format("partrain: culprit: rank {} (missing_ranks at default_pg:0 "
                                     "seq {}): hung outside any collective",
                                     rank, seq)),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find(fmt::format("it never entered all_reduce of 256 B float on default_pg:0 "
                                     "seq {}, where ranks {} wait",
                                     seq, waiting)),
            std::string::npos)
      << run.err;
}

// From the hang to partrain's exit (the diagnosis is printed before it): reported, and bounded
// generously (the target is --collective-timeout + 5 s; a loaded machine slows the ranks' exit
// and the trace's end, never by torch's 30 minutes).
void report_time_to_diagnosis(const CommandResult& run, int64_t ended_ns, const char* how) {
  const std::optional<int64_t> hung = hang_started_ns(run.out);
  ASSERT_TRUE(hung.has_value()) << run.out;
  const double seconds = static_cast<double>(ended_ns - *hung) / 1e9;
  std::printf("%s: hang to diagnosis %.2f s (--collective-timeout 3s)\n", how, seconds);
  EXPECT_GT(seconds, 3.0) << "the watchdog fired before the timeout";
  EXPECT_LT(seconds, 60.0) << run.err;
}

TEST(TorchHang, LaunchNamesTheRankThatNeverEnteredTheAllReduce) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "hang.db").string();
  // The timeout around partrain, not around the rank's command: a `timeout` in between would be
  // the rank, and Python its helper process.
  const CommandResult run = run_shell(fmt::format(
      "timeout -k 10 300 {} launch -n 4 --collective-timeout 3s --trace {} -- {} {} "
      "--hang-rank 2 --hang-step 3",
      partrain_binary(), shell_quoted(trace), shell_quoted(torch_python()),
      shell_quoted(kHangScript)));
  const int64_t ended_ns = monotonic_now_ns();
  expect_culprit_named(run, 2, 3);
  report_time_to_diagnosis(run, ended_ns, "partrain launch");
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT rank FROM stats WHERE name = 'collective_diagnosis'"), "2\n");
  // The waiting ranks' unfinished all_reduce is in the trace, as their dumps held it.
  EXPECT_EQ(query.rows("SELECT group_concat(rank) FROM (SELECT rank FROM collectives WHERE "
                       "seq = 6 AND state = 'started' ORDER BY rank)"),
            "0,1,3\n");
}

TEST(TorchHang, TraceOfTorchrunNamesTheRankThatNeverEnteredTheAllReduce) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "hang.db").string();
  const CommandResult run = run_partrain(fmt::format(
      "trace --collective-timeout 3s -o {} -- timeout -k 10 300 {} --standalone "
      "--nproc-per-node 4 {} --hang-rank 1 --hang-step 2",
      shell_quoted(trace), torchrun(), shell_quoted(kHangScript)));
  const int64_t ended_ns = monotonic_now_ns();
  expect_culprit_named(run, 1, 2);
  report_time_to_diagnosis(run, ended_ns, "partrain trace -- torchrun");
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT rank FROM stats WHERE name = 'collective_diagnosis'"), "1\n");
}

// The user gives up on a hung job with Ctrl-C (no --collective-timeout): the ranks dump their
// flight recorders before Python's KeyboardInterrupt, as on SIGTERM, and the launcher names the
// rank that never entered the all_reduce. CPython's SIGINT handler had replaced the injection
// library's in the ranks: they stopped without a dump and no diagnosis was printed.
TEST(TorchHang, CtrlCOnAHungLaunchNamesTheRankThatNeverEnteredTheAllReduce) {
  PARTRAIN_REQUIRE_TORCH();
  ScratchDir scratch;
  const std::string trace = (scratch.path() / "hang.db").string();
  LaunchedProcess launch({partrain_binary(), "launch", "-n", "3", "--trace", trace, "--",
                          torch_python(), kHangScript, "--hang-rank", "1", "--hang-step", "2"});
  ASSERT_TRUE(
      launch.wait_for_stdout("rank 1 hangs before step 2's all_reduce", std::chrono::minutes(4)));
  // The others wait in the all_reduce past the 5 s that make a signal's dump a stuck rank's.
  std::this_thread::sleep_for(std::chrono::seconds(7));
  ASSERT_EQ(::kill(launch.pid(), SIGINT), 0);
  const Finished run = launch.finish(std::chrono::seconds(120));
  EXPECT_EQ(run.exit_code, 130) << run.err;
  EXPECT_NE(run.err.find("partrain: flight recorder: dumps of ranks 0-2"), std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("partrain: culprit: rank 1 (missing_ranks at default_pg:0 seq 4): hung "
                         "outside any collective"),
            std::string::npos)
      << run.err;
  // Python's KeyboardInterrupt still reached the ranks (their own cleanup runs).
  EXPECT_NE((run.out + run.err).find("KeyboardInterrupt"), std::string::npos) << run.out;
  TraceQuery query(trace);
  EXPECT_EQ(query.rows("SELECT rank FROM stats WHERE name = 'collective_diagnosis'"), "1\n");
}

}  // namespace
}  // namespace partrain::testing
