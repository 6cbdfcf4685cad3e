// The worker's flight dumper: the first cause writes rank_<R>.json (read back as the launcher
// does), later causes are refused, and a rank without a flight directory still dumps to stderr.
#include "profiler/flight/flight_dumper.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/file_size_limit.h"

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// One all_reduce of 4 bytes on the world of ranks 0 and 1, not finished.
void record_all_reduce(profiler::FlightRecorder& recorder) {
  CollectiveEvent event;
  event.comm_id = "world";
  event.op = "all_reduce";
  event.dtype = "float";
  event.bytes = 4;
  event.group_ranks = {0, 1};
  recorder.record(event);
}

TEST(FlightDumper, FirstCauseWinsAndTheFileReadsBack) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("flight_dumper_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  profiler::FlightRecorder recorder;
  record_all_reduce(recorder);
  FlightDumper dumper(recorder, FlightDumperOptions{3, dir, nullptr, 16});
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(
      dumper.dump(profiler::DumpTrigger::kWatchdog, "all_reduce (comm world, seq 0) stuck"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("flight recorder of rank 3 (watchdog: all_reduce (comm world, seq 0) stuck)"),
            std::string::npos)
      << err;
  EXPECT_FALSE(dumper.dump(profiler::DumpTrigger::kSignal, "stopped by SIGTERM"));

  EXPECT_EQ(flight_dump_path(dir, 3), dir / "rank_3.json");
  auto dump = profiler::flight_dump_from_json(read_text(dir / "rank_3.json"));
  ASSERT_TRUE(dump.is_ok()) << dump.status().message();
  EXPECT_EQ(dump->rank, 3);
  EXPECT_EQ(dump->trigger, profiler::DumpTrigger::kWatchdog);
  ASSERT_EQ(dump->entries.size(), 1u);
  EXPECT_EQ(dump->entries[0].state, CollectiveState::kEnqueued);
  EXPECT_FALSE(fs::exists(dir / "rank_3.json.partial"));
  fs::remove_all(dir);
}

// torchrun (--max-restarts) restarts every rank with the same rank in the same flight directory:
// the restarted rank's dump goes beside its first attempt's, each telling its attempt, so the
// launcher can still diagnose a hang in the first attempt after the second one dumped.
TEST(FlightDumper, ARestartedRankKeepsItsEarlierAttemptsDump) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("flight_dumper_restart_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  profiler::FlightRecorder first_recorder;
  CollectiveEvent event;
  event.comm_id = "default_pg:0";
  event.seq = 8;
  event.op = "all_reduce";
  event.dtype = "float";
  event.bytes = 4;
  event.group_ranks = {0, 1};
  first_recorder.record(event);
  ::testing::internal::CaptureStderr();
  FlightDumper first(first_recorder, FlightDumperOptions{1, dir, nullptr, 16, 0});
  EXPECT_TRUE(first.dump(profiler::DumpTrigger::kWatchdog, "all_reduce stuck"));
  profiler::FlightRecorder second_recorder;
  FlightDumper second(second_recorder, FlightDumperOptions{1, dir, nullptr, 16, 1});
  EXPECT_TRUE(second.dump(profiler::DumpTrigger::kSignal, "stopped by SIGTERM"));
  (void)::testing::internal::GetCapturedStderr();

  EXPECT_NE(flight_dump_path(dir, 1, 0), flight_dump_path(dir, 1, 1));
  auto earlier = profiler::flight_dump_from_json(read_text(flight_dump_path(dir, 1, 0)));
  ASSERT_TRUE(earlier.is_ok()) << earlier.status().message();
  EXPECT_EQ(earlier->attempt, 0);
  EXPECT_EQ(earlier->trigger, profiler::DumpTrigger::kWatchdog);
  EXPECT_EQ(earlier->entries.size(), 1u);
  auto later = profiler::flight_dump_from_json(read_text(flight_dump_path(dir, 1, 1)));
  ASSERT_TRUE(later.is_ok()) << later.status().message();
  EXPECT_EQ(later->attempt, 1);
  EXPECT_EQ(later->trigger, profiler::DumpTrigger::kSignal);
  fs::remove_all(dir);
}

// The attempt comes from torchrun's TORCHELASTIC_RESTART_COUNT; anything but a count is attempt 0.
TEST(FlightDumper, TheAttemptIsTorchrunsRestartCount) {
  ::setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
  EXPECT_EQ(restart_attempt_from_env(), 2);
  EXPECT_EQ(FlightDumperOptions{}.attempt, 2);
  ::setenv("TORCHELASTIC_RESTART_COUNT", "x", 1);
  EXPECT_EQ(restart_attempt_from_env(), 0);
  ::unsetenv("TORCHELASTIC_RESTART_COUNT");
  EXPECT_EQ(restart_attempt_from_env(), 0);
}

TEST(FlightDumper, SignalDumpsAreQuiet) {
  profiler::FlightRecorder recorder;
  FlightDumper dumper(recorder, FlightDumperOptions{1, std::nullopt, nullptr, 16});
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(dumper.dump(profiler::DumpTrigger::kSignal, "stopped by SIGTERM"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

// A PyTorch rank's failed collective dumps without printing it: the rank's own traceback follows
// and is what the launcher's tail of its stderr is to show; the file is written all the same.
TEST(FlightDumper, ACollectiveErrorCanDumpWithoutPrintingIt) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("flight_dumper_quiet_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  profiler::FlightRecorder recorder;
  record_all_reduce(recorder);
  FlightDumperOptions options{2, dir, nullptr, 16};
  options.print_collective_error = false;
  FlightDumper dumper(recorder, options);
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(dumper.dump(profiler::DumpTrigger::kCollectiveError, "all_reduce failed"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  auto dump = profiler::flight_dump_from_json(read_text(dir / "rank_2.json"));
  ASSERT_TRUE(dump.is_ok()) << dump.status().message();
  EXPECT_EQ(dump->trigger, profiler::DumpTrigger::kCollectiveError);
  fs::remove_all(dir);
}

// A dump that does not fit (a full disk; here the file-size limit, which needs no root and fails
// the same way, with SIGXFSZ ignored as partrain does) leaves no file, not an empty one renamed
// into place, and the rank says which dump was lost and why. The dump is small: it is written out
// only when the file closes, where the old code no longer checked.
TEST(FlightDumper, ADumpThatDoesNotFitLeavesNoFileAndSaysSo) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("flight_dumper_full_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  profiler::FlightRecorder recorder;
  record_all_reduce(recorder);
  testing::LimitedRun run = testing::run_with_file_size_limit(0, [&] {
    FlightDumper dumper(recorder, FlightDumperOptions{3, dir, nullptr, 16});
    dumper.dump(profiler::DumpTrigger::kSignal, "stopped by SIGTERM");
    return 0;
  });
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(fs::exists(dir / "rank_3.json"));
  EXPECT_FALSE(fs::exists(dir / "rank_3.json.partial"));
  EXPECT_NE(
      run.err.find("rank 3: the flight-recorder dump could not be written (File too large): " +
                   (dir / "rank_3.json.partial").string()),
      std::string::npos)
      << run.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace partrain::profiler
