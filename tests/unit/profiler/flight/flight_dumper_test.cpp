// The worker's flight dumper: the first cause writes rank_<R>.json (read back as the launcher
// does), later causes are refused, and a rank without a flight directory still dumps to stderr.
#include "profiler/flight/flight_dumper.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace partrain::profiler {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(FlightDumper, FirstCauseWinsAndTheFileReadsBack) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("flight_dumper_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  profiler::FlightRecorder recorder;
  CollectiveEvent event;
  event.comm_id = "world";
  event.op = "all_reduce";
  event.dtype = "float";
  event.bytes = 4;
  event.group_ranks = {0, 1};
  recorder.record(event);
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

TEST(FlightDumper, SignalDumpsAreQuiet) {
  profiler::FlightRecorder recorder;
  FlightDumper dumper(recorder, FlightDumperOptions{1, std::nullopt, nullptr, 16});
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(dumper.dump(profiler::DumpTrigger::kSignal, "stopped by SIGTERM"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace partrain::profiler
